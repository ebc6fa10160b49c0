package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

var benchTestingInit sync.Once

// microBench is the micro scenario (bench --only micro): its methods share
// the run's environment, benchEnv, and its helpers.
type microBench struct{ *benchEnv }

// run runs Go benchmarks of the hot paths in this process with
// testing.Benchmark: the registry calls, the payload rebuild stages, and
// the HTTP handlers without the network.
func (e microBench) run() error {
	benchTestingInit.Do(testing.Init)
	benchtime := "1s"
	if e.quick {
		benchtime = "300ms"
	}
	if e.smoke {
		benchtime = "1x" // each benchmark's code once
	}
	if err := flag.Set("test.benchtime", benchtime); err != nil {
		return err
	}
	const sc = "micro"
	report := func(figure string, r testing.BenchmarkResult, target string, met *bool) {
		v, unit := float64(r.T.Nanoseconds())/float64(max(r.N, 1)), "ns/op"
		switch {
		case v >= 10e6:
			v, unit = v/1e6, "ms/op"
		case v >= 10e3:
			v, unit = v/1e3, "µs/op"
		}
		e.add(benchRow{Scenario: sc, Figure: figure, Value: v, Unit: unit, Target: target, Met: met,
			Note: fmt.Sprintf("%d allocs/op, %d B/op, %d ops", r.AllocsPerOp(), r.AllocedBytesPerOp(), r.N)})
	}

	n10k := e.fleetN
	reg10k, err := benchRegistryOf(n10k)
	if err != nil {
		return err
	}
	hbs := make([]registry.Op, n10k)
	for i := range n10k {
		hbs[i] = registry.RenewOp(benchAppName(i), benchInstanceID(i)).Dirty(benchDirty(i))
	}
	renew := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			k := i % n10k
			if _, err := reg10k.Apply(hbs[k]); err != nil {
				b.Fatal(err)
			}
		}
	})
	e.add(benchRow{Scenario: sc, Figure: "Registry.Renew (10k), allocs", Value: float64(renew.AllocsPerOp()), Unit: "allocs/op",
		Target: "0", Met: benchBool(renew.AllocsPerOp() == 0)})
	report("Registry.Renew (10k)", renew, "", nil)
	// With the renewal feed on, as in a node that replicates (nobody takes
	// here: each lease is fed once).
	reg10k.RenewalsReady()
	report("Registry.Renew (10k), parallel, renewal feed on", testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		var next sync.Mutex
		w := 0
		b.RunParallel(func(pb *testing.PB) {
			next.Lock()
			i := w * 997
			w++
			next.Unlock()
			for pb.Next() {
				k := i % n10k
				i++
				_, _ = reg10k.Apply(hbs[k])
			}
		})
	}), "", nil)

	// Register: new instances into a registry that grows to 100k, then
	// starts again empty.
	insts := make([]*registry.Instance, e.bigN)
	for i := range insts {
		insts[i] = benchInstance(i)
	}
	report("Registry.Register (new instance, up to 100k)", testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		r, _ := registry.New(registry.DefaultConfig())
		for i := 0; b.Loop(); i++ {
			k := i % len(insts)
			if k == 0 && i > 0 {
				b.StopTimer()
				r, _ = registry.New(registry.DefaultConfig())
				b.StartTimer()
			}
			if _, err := r.Apply(registry.RegisterOp(insts[k])); err != nil {
				b.Fatal(err)
			}
		}
	}), "", nil)

	for _, n := range []int{n10k, e.bigN} {
		label := benchSize(n)
		// Register, then prune the delta queue as 3 minutes later: a
		// rebuild in the steady state, not right after a mass registration.
		var offset atomic.Int64
		cfg := registry.DefaultConfig()
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		r, err := registry.New(cfg)
		if err != nil {
			return err
		}
		for i := range n {
			if _, err := r.Apply(registry.RegisterOp(insts[i])); err != nil {
				return err
			}
		}
		offset.Store(int64(cfg.DeltaRetention + time.Second))
		r.PruneDeltas()
		statuses := []registry.Status{registry.StatusDown, registry.StatusUp}
		report("snapshot rebuild after one change ("+label+")", testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := r.Apply(registry.StatusOp(benchAppName(0), benchInstanceID(0), statuses[i%2])); err != nil {
					b.Fatal(err)
				}
				_ = r.Snapshot()
			}
		}), "", nil)
		// The server's side of the first full fetch after one change,
		// without the network: the snapshot, the changed app's piece, its
		// chunk, and writing the parts out.
		srvN, err := httpapi.New(func() httpapi.Config {
			c := httpapi.DefaultConfig()
			c.Registry = r
			c.Logger = zerolog.Nop()
			return c
		}())
		if err != nil {
			return err
		}
		for _, format := range []struct{ name, headers string }{{"gzip JSON", benchFetchHeaders}, {"gzip XML", benchFetchXMLHeaders}} {
			get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/eureka/apps", nil)
			benchSetHeaders(get.Header, format.headers)
			w := &benchDiscard{h: http.Header{}}
			srvN.ServeHTTP(w, get) // the first fetch encodes every piece
			res := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := r.Apply(registry.StatusOp(benchAppName(0), benchInstanceID(0), statuses[i%2])); err != nil {
						b.Fatal(err)
					}
					w.reset()
					srvN.ServeHTTP(w, get)
					if w.code != http.StatusOK {
						b.Fatalf("fetch: %d", w.code)
					}
				}
			})
			perOp := time.Duration(res.NsPerOp())
			report("full fetch after one change through ServeHTTP ("+label+", "+format.name+")", res, "≤ 5 ms", benchBool(perOp <= 5*time.Millisecond))
		}
		snap := r.Snapshot()
		// The plain document as httpapi builds it (the encoder sizes its
		// buffer), the same into a reused buffer (the floor), and the gzip
		// payload httpapi caches, compressed as it is encoded.
		report("JSON encode of the full registry, plain ("+label+")", testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = wire.AppendApplicationsJSON(nil, snap.Apps, "1", snap.Hashcode)
			}
		}), "", nil)
		report("JSON encode into a reused buffer ("+label+")", testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			buf := wire.AppendApplicationsJSON(nil, snap.Apps, "1", snap.Hashcode)
			for b.Loop() {
				buf = wire.AppendApplicationsJSON(buf[:0], snap.Apps, "1", snap.Hashcode)
			}
		}), "", nil)
		report("gzip JSON streamed from the encoder ("+label+")", testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
			for b.Loop() {
				var buf bytes.Buffer
				buf.Grow(n * 96)
				w.Reset(&buf)
				if err := wire.WriteApplicationsJSON(w, snap.Apps, "1", snap.Hashcode); err != nil {
					b.Fatal(err)
				}
				_ = w.Close()
			}
		}), "", nil)
	}

	// The HTTP handlers, without the network.
	srv, err := httpapi.New(func() httpapi.Config {
		c := httpapi.DefaultConfig()
		c.Registry = reg10k
		c.Logger = zerolog.Nop()
		return c
	}())
	if err != nil {
		return err
	}
	hbReqs := make([]*http.Request, n10k)
	for i := range hbReqs {
		hbReqs[i], _ = http.NewRequest(http.MethodPut, "http://127.0.0.1"+benchHeartbeatPath(i), nil)
		benchSetHeaders(hbReqs[i].Header, benchClientHeaders)
	}
	w := &benchDiscard{h: http.Header{}}
	report("heartbeat through httpapi ServeHTTP (10k)", testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			w.reset()
			srv.ServeHTTP(w, hbReqs[i%n10k])
			if w.code != http.StatusOK {
				b.Fatalf("heartbeat: %d", w.code)
			}
		}
	}), "", nil)
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/eureka/apps", nil)
	benchSetHeaders(get.Header, benchFetchHeaders)
	report("full fetch from cache through ServeHTTP (10k, gzip)", testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.reset()
			srv.ServeHTTP(w, get)
			if w.code != http.StatusOK {
				b.Fatalf("fetch: %d", w.code)
			}
		}
	}), "", nil)
	return nil
}

// benchRegistryOf returns a registry holding fleet instances [0, n).
func benchRegistryOf(n int) (*registry.Registry, error) {
	r, err := registry.New(registry.DefaultConfig())
	if err != nil {
		return nil, err
	}
	r.OpenForTraffic()
	for i := range n {
		if _, err := r.Apply(registry.RegisterOp(benchInstance(i))); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func benchSetHeaders(h http.Header, lines string) {
	for _, line := range strings.Split(lines, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
}

// benchDiscard is a ResponseWriter that keeps only the status code.
type benchDiscard struct {
	h    http.Header
	code int
}

func (w *benchDiscard) Header() http.Header { return w.h }
func (w *benchDiscard) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *benchDiscard) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(b), nil
}

func (w *benchDiscard) reset() {
	clear(w.h)
	w.code = 0
}
