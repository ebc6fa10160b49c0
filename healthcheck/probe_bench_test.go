package healthcheck

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// probeBackend answers every connection with a fixed 200 and closes, with
// as little work as a loopback backend can do (one buffer per connection,
// no HTTP parsing).
func probeBackend(b *testing.B) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{\"status\":\"UP\"}")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				var buf [512]byte
				_, _ = c.Read(buf[:])
				_, _ = c.Write(resp)
				c.Close()
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

func benchTarget(b *testing.B, m Mode) target {
	ap := probeBackend(b)
	return target{mode: m, addr: ap, host: "127.0.0.1", hostHeader: ap.String(), requestURI: "/actuator/health"}
}

// BenchmarkProbe runs prober.probe, one at a time, against an in-process
// backend: ns/op and allocs/op include the backend's accept, read, write
// and close (both ends are in this process), so compare them with
// BenchmarkProbeControl, the same cycle with no Muster code.
func BenchmarkProbe(b *testing.B) {
	for _, m := range []Mode{ModeHTTP, ModeTCP} {
		b.Run(m.String(), func(b *testing.B) {
			t := benchTarget(b, m)
			p := newProber(2 * time.Second)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if ok, res := p.probe(ctx, t); !ok {
					b.Fatal(res)
				}
			}
		})
	}
}

// BenchmarkProbeControl is the bare cycle BenchmarkProbe is measured
// against, what any prober must do (tools/bench's control does the same):
// net.Dialer (no keep-alive) bounded by the timeout (Dialer.Timeout), a
// reset close, and for HTTP the probe's request and its status line read
// under a connection deadline; no Muster code (no probe context, metrics
// or result string).
func BenchmarkProbeControl(b *testing.B) {
	for _, m := range []Mode{ModeHTTP, ModeTCP} {
		b.Run(m.String(), func(b *testing.B) {
			t := benchTarget(b, m)
			req := []byte("GET " + t.requestURI + " HTTP/1.1\r\nHost: " + t.hostHeader +
				"\r\nUser-Agent: muster-health-check\r\nAccept: */*\r\nConnection: close\r\n\r\n")
			d := net.Dialer{KeepAlive: -1, Timeout: 2 * time.Second}
			ctx := context.Background()
			b.ReportAllocs()
			var buf [maxBodyRead]byte
			for b.Loop() {
				start := time.Now()
				c, err := d.DialTCP(ctx, "tcp", netip.AddrPort{}, t.addr)
				if err != nil {
					b.Fatal(err)
				}
				_ = c.SetLinger(0)
				if m == ModeHTTP {
					_ = c.SetDeadline(start.Add(d.Timeout))
					if _, err := c.Write(req); err != nil {
						b.Fatal(err)
					}
					n := 0
					for !bytes.Contains(buf[:n], []byte{'\n'}) {
						k, err := c.Read(buf[n:])
						n += k
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				c.Close()
			}
		})
	}
}
