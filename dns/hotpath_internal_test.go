package dns

import (
	"fmt"
	"net"
	"testing"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// benchWriter is a UDP ResponseWriter that packs and keeps nothing: what
// miekg/dns's own writer does before the socket (WriteMsg packs).
type benchWriter struct {
	n   int
	buf []byte
}

var benchRemote = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}

func (w *benchWriter) LocalAddr() net.Addr  { return benchRemote }
func (w *benchWriter) RemoteAddr() net.Addr { return benchRemote }
func (w *benchWriter) WriteMsg(m *mdns.Msg) error {
	b, err := m.PackBuffer(w.buf[:0])
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
func (w *benchWriter) Write(b []byte) (int, error) { w.n = len(b); return len(b), nil }
func (w *benchWriter) Close() error                { return nil }
func (w *benchWriter) TsigStatus() error           { return nil }
func (w *benchWriter) TsigTimersOnly(bool)         {}
func (w *benchWriter) Hijack()                     {}

// BenchmarkServe_app64: the server's hot path (no socket) for the A and
// SRV names of a 64-instance app in a 10k-instance registry, over UDP with
// EDNS0 1232: name to packed answer, metrics included.
func BenchmarkServe_app64(b *testing.B) {
	rcfg := registry.DefaultConfig()
	rcfg.Now = registrytest.NewClock().Now
	reg, err := registry.New(rcfg)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10_000 {
		app := fmt.Sprintf("APP-%03d", i/64)
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		in := registrytest.NewInstance(app, fmt.Sprint("i", i), func(in *registry.Instance) { in.IPAddr = ip })
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			b.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.RateLimit = 0
	s, err := New(cfg, Options{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"app-007.app.muster.", mdns.TypeA}, {"_app-007._tcp.app.muster.", mdns.TypeSRV}} {
		b.Run(mdns.TypeToString[q.qtype], func(b *testing.B) {
			w := &benchWriter{buf: make([]byte, 0, 65535)}
			m := new(mdns.Msg)
			m.SetQuestion(q.name, q.qtype)
			m.SetEdns0(1232, false)
			b.ReportAllocs()
			for b.Loop() {
				m.Id++
				s.serveUDP(w, m)
				if w.n <= 512 {
					b.Fatalf("answer of %d bytes", w.n)
				}
			}
			b.ReportMetric(float64(w.n), "bytes/answer")
		})
	}
}
