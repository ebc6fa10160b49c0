package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- 9. Watch: blocking fetches end to end ----
//
// Two clustered nodes, A and B. Watchers attach to B with the client
// package's Watch (blocking fetches): one measured watcher of app
// WATCHED, and 1,000 then 10,000 idle watchers of app HOT, which does not
// change while propagation is measured. A change is a register or a cancel
// of a WATCHED instance sent to A; its figure is the time from sending it
// to A until the measured watcher's channel delivers the list that shows
// it: A's write, replication to B, B's hub waking the held request, the
// answer and the client's decoding. Then one change of HOT wakes every
// idle watcher at once: B's CPU for that, and how long until all of them
// had the new list.

const (
	benchWatchedApp = "WATCHED"
	benchHotApp     = "HOT"
)

// watchBench is the watch scenario (bench --only watch): its methods share
// the run's environment, benchEnv, and its helpers.
type watchBench struct{ *benchEnv }

func (e watchBench) run() error {
	a, err := e.startChild("watch-a", "muster", "--cluster")
	if err != nil {
		return err
	}
	b, err := e.startChild("watch-b", "muster", "--cluster", "--join", a.Gossip)
	if err != nil {
		return err
	}
	if err := benchWait(e.ctx, 30*time.Second, "two nodes to see each other", func() bool {
		for _, nd := range []*benchChild{a, b} {
			if st, err := nd.status(); err != nil || st.Peers != 1 || !st.Opened {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	fleet := e.fleetN // on A, heartbeated in the loaded phases
	if _, err := e.registerFleet(a, 0, fleet); err != nil {
		return err
	}
	// HOT exists before anyone watches it, so idle watchers hold.
	if err := benchWatchWrite(a, http.MethodPost, "/eureka/apps/"+benchHotApp, benchWatchBody(benchHotApp, "hot-0")); err != nil {
		return err
	}

	if err := benchWait(e.ctx, time.Minute, "B to hold the fleet and HOT", func() bool {
		st, err := b.status()
		return err == nil && st.Fleet == fleet+1
	}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	measured, err := benchWatchClient(b, 4)
	if err != nil {
		return err
	}
	updates, err := measured.Watch(ctx, benchWatchedApp)
	if err != nil {
		return err
	}
	<-updates // the first list

	idle, err := benchWatchClient(b, 20_000)
	if err != nil {
		return err
	}
	var delivered atomic.Int64
	attached := 0
	count := 300
	if e.quick {
		count = 100
	}
	watchers := []int{1_000, 10_000}
	quiet := 3 * time.Second
	if e.smoke {
		count, watchers, quiet = 6, []int{20, 50}, 500*time.Millisecond
	}
	mem0, _ := b.mem(true)
	for _, n := range watchers {
		for ; attached < n; attached++ {
			ch, err := idle.Watch(ctx, benchHotApp)
			if err != nil {
				return err
			}
			go func() {
				first := true
				for range ch {
					if !first {
						delivered.Add(1)
					}
					first = false
				}
			}()
		}
		if err := benchWait(e.ctx, 2*time.Minute, fmt.Sprintf("%d held requests on B", n+1), func() bool {
			return b.metric("muster_watch_held_requests") >= float64(n+1)
		}); err != nil {
			return err
		}
		mem, _ := b.mem(true)
		e.add(benchRow{Scenario: "watch", Figure: fmt.Sprintf("memory per idle watcher (%d)", n),
			Value: float64(int64(mem.RSS)-int64(mem0.RSS)) / float64(n+1) / 1024, Unit: "KiB",
			Note: fmt.Sprintf("B's RSS growth over %d held requests (connection, goroutine, request); heap %+.0f KiB per watcher, %d goroutines",
				n+1, float64(int64(mem.HeapInuse)-int64(mem0.HeapInuse))/float64(n+1)/1024, mem.Goroutines)})

		// Idle means idle: no change for a while, only the watchers
		// holding (and re-asking when their wait of 30 s passes).
		w0, _ := b.metrics("muster_watch_wakeups_total", "muster_watch_timeouts_total")
		cpuQuiet0 := b.cpu()
		time.Sleep(quiet)
		cpuQuiet := b.cpu() - cpuQuiet0
		w1, _ := b.metrics("muster_watch_wakeups_total", "muster_watch_timeouts_total")
		e.add(benchRow{Scenario: "watch", Figure: fmt.Sprintf("B's CPU with %d idle watchers, no change", n), Value: float64(cpuQuiet) / float64(time.Millisecond) / quiet.Seconds(), Unit: "ms/s",
			Note: fmt.Sprintf("over %s: %.0f wakeups, %.0f waits ended (memberlist and the node's own timers included)", quiet, w1[0]-w0[0], w1[1]-w0[1])})

		cpu0 := b.cpu()
		idleRes, err := benchWatchPropagate(e.ctx, a, updates, count)
		if err != nil {
			return err
		}
		idleCPU := b.cpu() - cpu0
		target := time.Duration(0) // the target is for 1,000 watchers
		if n == 1_000 {
			target = 50 * time.Millisecond
		}
		e.addWatchPropagation(fmt.Sprintf("idle, %d idle watchers", n), idleRes, target)
		e.add(benchRow{Scenario: "watch", Figure: fmt.Sprintf("B's CPU per change, idle phase (%d watchers)", n), Value: float64(idleCPU) / float64(time.Millisecond) / float64(max(idleRes.visible.Count(), 1)), Unit: "ms",
			Note: fmt.Sprintf("all of B's CPU while the changes were made back to back (%.0f ms/s): the replicated write, a new registry snapshot of %d instances, the measured watcher's answer and its next request", float64(idleCPU)/float64(time.Millisecond)/idleRes.elapsed.Seconds(), fleet+1)})

		// Under heartbeat load on A.
		f := benchFleetOf(fleet)
		lctx, lcancel := context.WithCancel(e.ctx)
		loadDone := make(chan loadgen.Result, 1)
		go func() {
			res, _ := loadgen.Run(lctx, loadgen.Config{Addr: a.API, Client: e.client, Concurrency: e.conc, Duration: 10 * time.Minute,
				Next: func(w int, seq uint64) loadgen.Request {
					return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(fleet)], Header: benchClientHeaders}
				}})
			loadDone <- res
		}()
		time.Sleep(max(e.warmup, time.Second))
		loaded, err := benchWatchPropagate(e.ctx, a, updates, count)
		lcancel()
		hb := <-loadDone
		if err != nil {
			return err
		}
		e.addWatchPropagation(fmt.Sprintf("under heartbeat load, %d idle watchers", n), loaded, time.Second)
		e.add(benchRow{Scenario: "watch", Figure: fmt.Sprintf("heartbeats/s on A during the loaded phase (%d watchers)", n), Value: hb.RPS(), Unit: "req/s",
			Note: fmt.Sprintf("%d conns, %d not 2xx", e.conc, hb.NotOK())})
	}

	// One change of HOT wakes every idle watcher.
	before := delivered.Load()
	cpu0 := b.cpu()
	t0 := time.Now()
	if err := benchWatchWrite(a, http.MethodPost, "/eureka/apps/"+benchHotApp, benchWatchBody(benchHotApp, "hot-1")); err != nil {
		return err
	}
	err = benchWait(e.ctx, 2*time.Minute, "every idle watcher to get the HOT change", func() bool {
		return delivered.Load()-before >= int64(attached)
	})
	all := time.Since(t0)
	cpu := b.cpu() - cpu0
	if err != nil {
		return err
	}
	e.add(benchRow{Scenario: "watch", Figure: fmt.Sprintf("one change wakes %d watchers: B's CPU", attached), Value: float64(cpu) / float64(time.Millisecond), Unit: "ms",
		Note: fmt.Sprintf("%.1f µs per watcher: the answers and the watchers' next held requests", float64(cpu)/float64(time.Microsecond)/float64(attached))})
	e.add(benchRow{Scenario: "watch", Figure: fmt.Sprintf("one change wakes %d watchers: until the last has it", attached), Value: ms(all), Unit: "ms",
		Note: "from the write to A until the last watcher in this process decoded the new list (the bench process decodes them all, on the same 2 cores)"})
	over := b.metric("muster_watch_over_limit_total")
	e.add(benchRow{Scenario: "watch", Figure: "blocking fetches over muster.watch.max-watchers", Value: over, Target: "0", Met: benchBool(over == 0)})
	return nil
}

type benchWatchResult struct {
	visible  *loadgen.Histogram
	timeouts int
	elapsed  time.Duration
}

func (e watchBench) addWatchPropagation(phase string, r benchWatchResult, target time.Duration) {
	h := r.visible
	p99 := h.Quantile(0.99)
	note := fmt.Sprintf("%d changes (registers and cancels alternating), write to A → client.Watch on B delivers", h.Count())
	if r.timeouts > 0 {
		note += fmt.Sprintf(", %d not delivered within 10 s", r.timeouts)
	}
	e.add(benchRow{Scenario: "watch", Figure: phase + ": p50", Value: ms(h.Quantile(0.5)), Unit: "ms", Note: note})
	row := benchRow{Scenario: "watch", Figure: phase + ": p99", Value: ms(p99), Unit: "ms"}
	if target > 0 {
		row.Target, row.Met = fmt.Sprintf("< %s", target), benchBool(p99 < target && r.timeouts == 0)
	}
	e.add(row)
	e.add(benchRow{Scenario: "watch", Figure: phase + ": max", Value: ms(h.Max()), Unit: "ms"})
}

// benchWatchPropagate alternates registering and cancelling one WATCHED
// instance on A and times each until the watch delivers it.
func benchWatchPropagate(ctx context.Context, a *benchChild, updates <-chan []client.Instance, count int) (benchWatchResult, error) {
	out := benchWatchResult{visible: loadgen.NewHistogram()}
	start := time.Now()
	for i := 0; i < count && ctx.Err() == nil; i++ {
		id := fmt.Sprintf("w-%d", i/2)
		var method, path string
		var body []byte
		present := i%2 == 0
		if present {
			method, path, body = http.MethodPost, "/eureka/apps/"+benchWatchedApp, benchWatchBody(benchWatchedApp, id)
		} else {
			method, path = http.MethodDelete, "/eureka/apps/"+benchWatchedApp+"/"+id
		}
		t0 := time.Now()
		if err := benchWatchWrite(a, method, path, body); err != nil {
			return out, err
		}
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case list, ok := <-updates:
				if !ok {
					return out, fmt.Errorf("watch ended")
				}
				has := false
				for _, in := range list {
					has = has || in.ID == id
				}
				if has == present {
					out.visible.Record(time.Since(t0))
					break wait
				}
			case <-deadline:
				out.timeouts++
				break wait
			case <-ctx.Done():
				return out, ctx.Err()
			}
		}
	}
	out.elapsed = time.Since(start)
	return out, nil
}

func benchWatchWrite(a *benchChild, method, path string, body []byte) error {
	req, err := http.NewRequest(method, "http://"+a.API+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := benchCtl.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s on A: %d", method, path, resp.StatusCode)
	}
	return nil
}

func benchWatchBody(app, id string) []byte {
	return fmt.Appendf(nil, `{"instance":{"instanceId":%q,"hostName":"%s.bench","app":%q,"ipAddr":"10.1.0.1","status":"UP",`+
		`"port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"vipAddress":"%s","secureVipAddress":"%s"}}`, id, id, app, app, app)
}

// benchWatchClient is a client of B whose transport keeps a connection per
// held request.
func benchWatchClient(b *benchChild, conns int) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Servers = []client.Server{{URL: "http://" + b.API + "/eureka/"}}
	cfg.Logger = zerolog.Nop()
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 2 * time.Minute}}
	return client.New(cfg)
}
