package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// dataDirFile gives each node a data dir on a volume of its own.
const dataDirFile = "scripts/chaos/docker-compose.datadir.yml"

// composeWith runs a compose command with one more compose file.
func (b *bench) composeWith(ctx context.Context, file string, args ...string) error {
	all := append(append([]string{}, b.compose[1:]...), "-f", file)
	_, err := run(ctx, b.compose[0], append(all, args...)...)
	return err
}

// readWatch polls every node's GET /eureka/apps through its published port
// and counts the answers; a 200 that lists fewer instances than are alive
// is what a full restart must never produce. The nodes' own instances
// (selfApp) are not counted: they are not the live fleet.
type readWatch struct {
	alive                      int
	ok, refused, short, failed atomic.Int64
	minOK                      atomic.Int64
	// mu guards firstShort.
	mu         sync.Mutex
	firstShort string
}

func (w *readWatch) run(ctx context.Context) {
	client := clients.Load().host // the operator's certificate (secure.go)
	w.minOK.Store(int64(w.alive) + 1_000_000)
	for ctx.Err() == nil {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.poll(ctx, client, n)
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *readWatch) poll(ctx context.Context, client *http.Client, node string) {
	url := strings.Replace(nodeBase, "127.0.0.1:8761", "127.0.0.1:"+publishedPorts[node], 1) + "/eureka/apps"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	authorize(req)
	resp, err := client.Do(req)
	if err != nil {
		w.failed.Add(1)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		w.failed.Add(1)
		return
	}
	switch resp.StatusCode {
	case http.StatusOK:
		reg, err := clientVisible(body)
		if err != nil {
			w.failed.Add(1)
			return
		}
		got := 0
		for k := range reg {
			if !isSelf(k) {
				got++
			}
		}
		w.ok.Add(1)
		for {
			cur := w.minOK.Load()
			if int64(got) >= cur || w.minOK.CompareAndSwap(cur, int64(got)) {
				break
			}
		}
		if got < w.alive {
			if w.short.Add(1) == 1 {
				w.mu.Lock()
				w.firstShort = fmt.Sprintf("%s answered 200 with %d fleet instances at %s, %d alive", node, got, time.Now().Format("15:04:05.000"), w.alive)
				w.mu.Unlock()
			}
		}
	case http.StatusForbidden:
		w.refused.Add(1)
	default:
		w.failed.Add(1)
	}
}

// fullRestartScenario stops all three nodes while the clients keep
// running, starts them again, and watches every read meanwhile: first
// without a data dir (the nodes must refuse reads until the clients have
// registered again), then with one (they serve their snapshots).
func fullRestartScenario(ctx context.Context, b *bench, r *report) error {
	for _, withData := range []bool{false, true} {
		label := "without a data dir"
		if withData {
			label = "with a data dir"
			if err := b.composeWith(ctx, dataDirFile, "up", "-d", "--no-deps", "node-a", "node-b", "node-c"); err != nil {
				return err
			}
			r.step("nodes recreated with muster.data-dir on a volume each (snapshot every 1 s)")
			if _, err := waitUntil(ctx, 2*time.Minute, 500*time.Millisecond, func() (bool, string) {
				for _, n := range nodes {
					if !b.ready(ctx, n) {
						return false, n + " /readyz not 200"
					}
				}
				return converged(ctx, b, fleet, nodes...)
			}); err != nil {
				return fmt.Errorf("nodes with a data dir did not come back: %w", err)
			}
			time.Sleep(3 * time.Second) // a snapshot of the whole fleet on every node
		}
		if err := restartAll(ctx, b, r, label, withData); err != nil {
			return err
		}
	}
	return nil
}

func restartAll(ctx context.Context, b *bench, r *report, label string, withData bool) error {
	emptyBefore := emptyRegistrySeen(ctx, b, r)
	watchCtx, stopWatch := context.WithCancel(ctx)
	w := &readWatch{alive: fleet}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.run(watchCtx) }()
	defer func() { stopWatch(); wg.Wait() }()
	time.Sleep(time.Second)

	if err := b.stop(ctx, nodes...); err != nil {
		return err
	}
	r.step("%s: all three nodes stopped (SIGTERM); the 100 clients keep running", label)
	if err := b.start(ctx, nodes...); err != nil {
		return err
	}
	r.step("%s: all three nodes started again", label)
	serving, err := waitUntil(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
		for _, n := range nodes {
			if !b.ready(ctx, n) {
				return false, n + " /readyz not 200"
			}
		}
		return converged(ctx, b, fleet, nodes...)
	})
	if err != nil {
		return fmt.Errorf("%s: the cluster did not come back: %w", label, err)
	}
	time.Sleep(5 * time.Second) // clients fetch every 2 s: let them read the open nodes
	stopWatch()
	wg.Wait()
	empty := emptyRegistrySeen(ctx, b, r) - emptyBefore

	cold, restored := 0, 0
	for _, n := range nodes {
		logs, _ := b.logs(ctx, n)
		// The logs hold the first start too; count this start only.
		if i := strings.LastIndex(logs, "serving the Eureka API"); i >= 0 {
			logs = logs[i:]
		}
		if strings.Contains(logs, "cold start: no peer has the registry") {
			cold++
		}
		if strings.Contains(logs, "loaded the snapshot") {
			restored++
		}
	}
	minOK := w.minOK.Load()
	if w.ok.Load() == 0 {
		minOK = 0
	}
	r.figure("%s: every node ready with all %d instances %s after the start; reads during the restart: %d × 200 (fewest instances in a 200: %d), %d × 403, %d failed (node down)",
		label, fleet, serving.Round(100*time.Millisecond), w.ok.Load(), minOK, w.refused.Load(), w.failed.Load())
	r.figure("%s: nodes that started cold (reads refused until clients re-registered): %d; restored from their snapshot: %d", label, cold, restored)
	w.mu.Lock()
	first := w.firstShort
	w.mu.Unlock()
	r.check(w.short.Load() == 0, "%s: no read answered 200 with fewer than the %d live instances (%d did; first: %s)", label, fleet, w.short.Load(), first)
	r.check(empty == 0, "%s: no client's full fetch came back empty (%d did)", label, empty)
	if withData {
		r.check(restored > 0, "%s: a node loaded its snapshot", label)
	} else {
		r.check(cold > 0 && w.refused.Load() > 0, "%s: nodes started cold and refused reads meanwhile", label)
	}
	return nil
}
