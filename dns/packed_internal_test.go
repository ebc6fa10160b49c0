package dns

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// captureWriter keeps the last answer written, as bytes.
type captureWriter struct {
	benchWriter
	tcp  bool
	last []byte
}

func (w *captureWriter) RemoteAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
	}
	return benchRemote
}
func (w *captureWriter) WriteMsg(m *mdns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
func (w *captureWriter) Write(b []byte) (int, error) { w.last = slices.Clone(b); return len(b), nil }

func packedTestServer(t *testing.T, cfg Config) (*Server, *registry.Registry) {
	t.Helper()
	rcfg := registry.DefaultConfig()
	rcfg.Now = registrytest.NewClock().Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	ip := func(s string) registrytest.Option { return func(in *registry.Instance) { in.IPAddr = s } }
	secure := func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 8443, Enabled: true} }
	for _, in := range []*registry.Instance{
		registrytest.NewInstance("ORDERS", "o1", ip("10.0.0.1"), registrytest.WithMetadata(map[string]string{"zone": "Z1", "weight": "7"}), secure),
		registrytest.NewInstance("ORDERS", "o2", ip("10.0.0.2"), registrytest.WithMetadata(map[string]string{"zone": "z2"})),
		registrytest.NewInstance("ORDERS", "o3", ip("10.0.0.3"), registrytest.WithStatus(registry.StatusOutOfService)),
		registrytest.NewInstance("ORDERS", "o4", ip("fd00::4"), registrytest.WithMetadata(map[string]string{"zone": "z1"}), secure),
		registrytest.NewInstance("ORDERS", "o5", ip("host.example")),
		registrytest.NewInstance("ORDERS", "o6", ip("::ffff:10.0.0.6")),
		registrytest.NewInstance("IDLE", "i1", registrytest.WithStatus(registry.StatusDown)),
	} {
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg, Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return s, reg
}

// ask sends q through serve and says what came back, and whether the
// packed way answered it.
func askInternal(t *testing.T, s *Server, q *mdns.Msg, tcp bool) (*mdns.Msg, []byte) {
	t.Helper()
	w := &captureWriter{tcp: tcp}
	s.serve(w, q, tcp)
	r := new(mdns.Msg)
	if err := r.Unpack(w.last); err != nil {
		t.Fatalf("%v: %v", q.Question, err)
	}
	return r, w.last
}

// TestPacked_sameAnswersAsTheGeneralWay: every name the packed answers
// serve gets the records, header and OPT the general way (answer, then
// miekg/dns packing) gives, over TCP and UDP with EDNS0 where all fit.
func TestPacked_sameAnswersAsTheGeneralWay(t *testing.T) {
	s, _ := packedTestServer(t, DefaultConfig())
	for _, c := range []struct {
		name  string
		qtype uint16
		want  int
	}{
		{"orders.app.muster.", mdns.TypeA, 3},
		{"orders.app.muster.", mdns.TypeAAAA, 1},
		{"OrDers.APP.muster.", mdns.TypeA, 3},
		{"z1.orders.app.muster.", mdns.TypeA, 1},
		{"Z1.orders.app.muster.", mdns.TypeAAAA, 1},
		{"_orders._tcp.app.muster.", mdns.TypeSRV, 4},
		{"_orders._tls.app.muster.", mdns.TypeSRV, 2},
		{"_orders._tcp.z2.app.muster.", mdns.TypeSRV, 1},
		{"_ORDERS._TLS.Z1.app.muster.", mdns.TypeSRV, 2},
	} {
		for _, tcp := range []bool{false, true} {
			for _, edns := range []uint16{0, 1232} {
				q := new(mdns.Msg)
				q.SetQuestion(c.name, c.qtype)
				q.CheckingDisabled = true
				if edns > 0 {
					q.SetEdns0(edns, false)
				}
				w := &captureWriter{tcp: tcp}
				if !s.serveFast(w, q, netip.Addr{}, tcp, time.Now()) {
					t.Fatalf("%s: not answered the packed way", c.name)
				}
				got := new(mdns.Msg)
				if err := got.Unpack(w.last); err != nil {
					t.Fatal(err)
				}
				want := s.answer(q)
				want.Truncated = false
				if opt := q.IsEdns0(); opt != nil {
					want.SetEdns0(1232, false)
				}
				what := c.name + " " + mdns.TypeToString[c.qtype]
				if got.MsgHdr != want.MsgHdr || !slices.Equal(got.Question, want.Question) {
					t.Errorf("%s (tcp %v, edns %d): header %+v %v, want %+v %v", what, tcp, edns, got.MsgHdr, got.Question, want.MsgHdr, want.Question)
				}
				if len(got.Answer) != c.want || !slices.Equal(rrStrings(got.Answer), rrStrings(want.Answer)) || !slices.Equal(rrStrings(got.Extra), rrStrings(want.Extra)) {
					t.Errorf("%s (tcp %v, edns %d):\n got %v %v\nwant %v %v", what, tcp, edns, got.Answer, got.Extra, want.Answer, want.Extra)
				}
			}
		}
	}
}

func rrStrings(rrs []mdns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// TestPacked_followsTheRegistry: a cached answer changes with the app
// (a new instance, one going DOWN, the app gone), and names the packed
// way does not serve still get the general answers (NXDOMAIN, an empty
// NOERROR with the SOA).
func TestPacked_followsTheRegistry(t *testing.T) {
	s, reg := packedTestServer(t, DefaultConfig())
	ask := func(name string, qtype uint16) *mdns.Msg {
		q := new(mdns.Msg)
		q.SetQuestion(name, qtype)
		r, _ := askInternal(t, s, q, false)
		return r
	}
	if r := ask("orders.app.muster.", mdns.TypeA); len(r.Answer) != 3 {
		t.Fatalf("before: %v", r.Answer)
	}
	in := registrytest.NewInstance("ORDERS", "o7", func(in *registry.Instance) { in.IPAddr = "10.0.0.7" })
	if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	if r := ask("orders.app.muster.", mdns.TypeA); len(r.Answer) != 4 {
		t.Fatalf("after a registration: %v", r.Answer)
	}
	if _, err := reg.Apply(registry.StatusOp("ORDERS", "o7", registry.StatusDown)); err != nil {
		t.Fatal(err)
	}
	if r := ask("orders.app.muster.", mdns.TypeA); len(r.Answer) != 3 {
		t.Fatalf("after DOWN: %v", r.Answer)
	}
	for _, id := range []string{"o1", "o2", "o3", "o4", "o5", "o6", "o7"} {
		if _, err := reg.Apply(registry.CancelOp("ORDERS", id)); err != nil {
			t.Fatal(err)
		}
	}
	if r := ask("orders.app.muster.", mdns.TypeA); r.Rcode != mdns.RcodeNameError || len(r.Ns) != 1 {
		t.Fatalf("app gone: %v", r)
	}
	if r := ask("idle.app.muster.", mdns.TypeA); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 {
		t.Fatalf("no UP instance: %v", r)
	}
	if r := ask("_idle._tcp.app.muster.", mdns.TypeA); r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 0 {
		t.Fatalf("A on an SRV name: %v", r)
	}
}

// TestPacked_truncation: past the size, whole SRV pairs are left out and
// TC set; over TCP owners past 16 KiB (a pointer's reach) still
// compressed enough that 1,000 SRV pairs fit in a message; max-answers
// holds.
func TestPacked_truncation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxAnswers = 1000
	rcfg := registry.DefaultConfig()
	rcfg.Now = registrytest.NewClock().Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		in := registrytest.NewInstance("BIG", "b"+string(rune('a'+i/26/26))+string(rune('a'+i/26%26))+string(rune('a'+i%26)),
			func(in *registry.Instance) { in.IPAddr = net.IPv4(10, 1, byte(i>>8), byte(i)).String() })
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(cfg, Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tcp      bool
		edns     uint16
		max      int
		tc       bool
		minCount int
	}{
		{false, 0, 512, true, 8},
		{false, 1232, 1232, true, 20},
		{true, 0, 65535, false, 1000}, // as miekg/dns packs them: 61 KB
	} {
		q := new(mdns.Msg)
		q.SetQuestion("_big._tcp.app.muster.", mdns.TypeSRV)
		if c.edns > 0 {
			q.SetEdns0(c.edns, false)
		}
		r, b := askInternal(t, s, q, c.tcp)
		if len(b) > c.max || r.Truncated != c.tc || len(r.Answer) < c.minCount || len(r.Answer) > 1000 {
			t.Errorf("%+v: %d bytes, TC=%v, %d answers", c, len(b), r.Truncated, len(r.Answer))
		}
		extra := r.Extra
		if c.edns > 0 {
			extra = extra[:len(extra)-1]
		}
		for i, rr := range r.Answer {
			if rr.(*mdns.SRV).Target != extra[i].Header().Name {
				t.Fatalf("%+v: SRV %v with %v", c, rr, extra[i])
			}
		}
	}
	s.cfg.MaxAnswers = 64
	q := new(mdns.Msg)
	q.SetQuestion("big.app.muster.", mdns.TypeA)
	if r, _ := askInternal(t, s, q, true); len(r.Answer) != 64 || r.Truncated {
		t.Errorf("max-answers 64 over TCP: %d answers TC=%v", len(r.Answer), r.Truncated)
	}
}
