package healthcheck_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// rawBackend answers every connection with a fixed 200 and closes: as
// little server work as a loopback test can have.
func rawBackend(b *testing.B) int {
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
				buf := make([]byte, 1024)
				_, _ = c.Read(buf)
				_, _ = c.Write(resp)
				c.Close()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// BenchmarkChecker_Round runs rounds over 2,000 instances until b.N probes
// have run: ns/probe is the wall time of one probe at the default
// concurrency, with both ends of each loopback connection in this process
// (tools/bench's healthcheck scenario measures the probing node alone).
func BenchmarkChecker_Round(b *testing.B) {
	port := rawBackend(b)
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	reg, _ := registry.New(rcfg)
	const n = 2000
	for i := range n {
		in := registrytest.NewInstance(fmt.Sprintf("APP-%d", i%40), fmt.Sprintf("i-%d", i))
		in.IPAddr, in.HostName = "127.0.0.1", "localhost"
		in.HealthCheckURL = fmt.Sprintf("http://127.0.0.1:%d/actuator/health", port)
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			b.Fatal(err)
		}
	}
	cfg := healthcheck.DefaultConfig()
	cfg.Enabled, cfg.Apps = true, []string{"*"}
	cfg.AllowedCIDRs = loopbackOnly
	cfg.Now = clk.Now
	chk, err := healthcheck.New(cfg, healthcheck.Options{Registry: reg, Self: "a", Members: func() []string { return []string{"a"} }})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	probes := 0
	for probes < b.N {
		res := chk.Round(context.Background())
		if res.Failed > 0 {
			b.Fatalf("%d probes failed", res.Failed)
		}
		probes += res.Probed
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(probes), "ns/probe")
}
