package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	watchclient "github.com/muster-registry/muster/client"
)

// watchChaos runs a watcher (the client package's Watch, blocking fetches,
// on all three nodes with failover) of app WATCHED while a writer changes
// that app every 300 ms through whichever node answers, and the nodes are
// restarted one by one, one is killed and restarted, and one is cut off the
// network. After each disruption, and while a node is away, the watcher
// must come to show exactly the instances the writer left: no stuck
// watcher, no missed final state.
func watchChaos(ctx context.Context, b *bench, r *report) error {
	cfg := watchclient.DefaultConfig()
	cfg.Servers = nil
	for _, n := range nodes {
		// The secured cluster: https with the operator's certificate, and
		// the admin's credentials in the URL as a Spring client has them.
		u := strings.Replace(nodeBase, "https://", "https://"+adminUser+":"+adminPassword+"@", 1)
		u = strings.Replace(u, "127.0.0.1:8761", "127.0.0.1:"+publishedPorts[n], 1)
		cfg.Servers = append(cfg.Servers, watchclient.Server{URL: u + "/eureka/"})
	}
	// No client-wide timeout: held requests are bounded by the client's
	// RequestTimeout plus the wait, per request.
	cfg.HTTPClient = &http.Client{Transport: clients.Load().write.Transport}
	// Short enough that a request held by a node that vanished from the
	// network is given up, and the client fails over, within seconds.
	cfg.WatchWait = 3 * time.Second
	cfg.RequestTimeout = 2 * time.Second
	cfg.RetryBackoff = 200 * time.Millisecond
	cfg.MaxRetryBackoff = 2 * time.Second
	cfg.Logger = zerolog.Nop()
	c, err := watchclient.New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates, err := c.Watch(wctx, "WATCHED")
	if err != nil {
		return err
	}
	w := &chaosWatcher{}
	go w.read(updates)
	wr := &chaosWriter{}
	go wr.run(wctx)

	// converge waits until the watcher shows what its current server holds
	// (the watch is correct) and what the writer left (the cluster lost no
	// change), with the writer paused so that the target holds still.
	converge := func(what string) {
		wr.pause()
		defer wr.resume()
		want := wr.state()
		var server string
		took, err := waitUntil(ctx, 20*time.Second, 50*time.Millisecond, func() (bool, string) {
			got := w.latest()
			server = nodeOfURL(c.CurrentServer().URL)
			held, err := watchedOn(ctx, b, server)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", server, err)
			}
			if !slices.Equal(got, held) {
				return false, fmt.Sprintf("watcher shows %v, its server %s holds %v", got, server, held)
			}
			return true, ""
		})
		r.figure("%s: the watcher showed its server's (%s) state %s after the writer paused (%d lists delivered so far, %d writes)", what, server, took.Round(10*time.Millisecond), w.count(), wr.writes())
		r.check(err == nil, "%s: the watcher shows exactly what its server %s holds (%v)", what, server, errString(err))
		// The cluster's side: what each node clients can reach holds,
		// against what the writer left. A difference here is replication's,
		// not the watch's (the check above): it is reported, and does not
		// fail the scenario.
		_, cerr := waitUntil(ctx, 10*time.Second, 100*time.Millisecond, func() (bool, string) {
			var diff []string
			for _, n := range nodes {
				b.mu.Lock()
				cut := b.cut[n]
				b.mu.Unlock()
				if cut {
					continue // clients cannot reach it; it holds what it had
				}
				held, err := watchedOn(ctx, b, n)
				if err != nil {
					continue // a node that is down or cut off
				}
				if !slices.Equal(held, want) {
					diff = append(diff, fmt.Sprintf("%s holds %v", n, held))
				}
			}
			return len(diff) == 0, fmt.Sprintf("the writer left %v; %s", want, strings.Join(diff, ", "))
		})
		if cerr != nil {
			r.figure("%s: REPLICATION DIFFERS from the writer: %v", what, cerr)
			r.step("warning: %s: the nodes do not hold what the writer left (replication, not the watch): %v", what, cerr)
		}
	}

	time.Sleep(2 * time.Second)
	converge("before any damage")

	// Rolling restart, gracefully: held requests are answered at shutdown.
	for _, n := range nodes {
		wr.pause()
		time.Sleep(time.Second) // replication of the last writes
		if err := b.stop(ctx, n); err != nil {
			return err
		}
		wr.resume()
		r.step("%s stopped (SIGTERM) while the writer goes on", n)
		time.Sleep(3 * time.Second)
		converge(n + " down")
		if err := b.start(ctx, n); err != nil {
			return err
		}
		if _, err := waitUntil(ctx, time.Minute, 100*time.Millisecond, func() (bool, string) { return b.ready(ctx, n), n + " /readyz not 200" }); err != nil {
			return err
		}
		time.Sleep(2 * time.Second)
		converge(n + " back")
	}

	// Crash of the first node, where the watcher returns after failovers.
	wr.pause()
	time.Sleep(time.Second)
	if err := b.kill(ctx, "node-a"); err != nil {
		return err
	}
	wr.resume()
	r.step("node-a killed (SIGKILL)")
	time.Sleep(3 * time.Second)
	converge("node-a crashed")
	if err := b.start(ctx, "node-a"); err != nil {
		return err
	}
	if _, err := waitUntil(ctx, time.Minute, 100*time.Millisecond, func() (bool, string) { return b.ready(ctx, "node-a"), "node-a /readyz not 200" }); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	converge("node-a restarted")

	// Partition: node-a (the watcher's first server) off the network.
	reconnect, err := b.disconnect(ctx, "node-a")
	if err != nil {
		return err
	}
	r.step("node-a cut off the network")
	time.Sleep(5 * time.Second)
	converge("node-a partitioned")
	if err := reconnect(); err != nil {
		return err
	}
	r.step("node-a reconnected")
	time.Sleep(5 * time.Second)
	converge("partition healed")
	st := c.Stats()
	r.figure("watcher: %d held requests, %d plain ones, %d failovers", st.WatchHeld, st.WatchPolls, st.Failovers)
	r.check(st.WatchHeld > st.WatchPolls, "the watcher used blocking fetches (%d held, %d plain)", st.WatchHeld, st.WatchPolls)
	return nil
}

// chaosWatcher keeps the watch's latest list of instance ids.
type chaosWatcher struct {
	// mu guards ids and lists.
	mu    sync.Mutex
	ids   []string
	lists int
}

func (w *chaosWatcher) read(updates <-chan []watchclient.Instance) {
	for list := range updates {
		ids := make([]string, 0, len(list))
		for _, in := range list {
			ids = append(ids, in.ID)
		}
		slices.Sort(ids)
		w.mu.Lock()
		w.ids, w.lists = ids, w.lists+1
		w.mu.Unlock()
	}
}

func (w *chaosWatcher) latest() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids
}

func (w *chaosWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lists
}

// chaosWriter registers watched-k and cancels watched-(k-3) in turn, through
// the first node that accepts, and keeps the set it left.
type chaosWriter struct {
	gate sync.Mutex // guards no field: held while paused, so no write starts
	// mu guards live, k and n.
	mu   sync.Mutex
	live map[string]bool
	k, n int
}

func (wr *chaosWriter) pause()  { wr.gate.Lock() }
func (wr *chaosWriter) resume() { wr.gate.Unlock() }

func (wr *chaosWriter) state() []string {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	var out []string
	for id := range wr.live {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (wr *chaosWriter) writes() int {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.n
}

func (wr *chaosWriter) run(ctx context.Context) {
	wr.live = map[string]bool{}
	for ctx.Err() == nil {
		wr.gate.Lock()
		wr.step()
		wr.gate.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// step makes the next change; a change no node accepted is not recorded and
// is tried again next time.
func (wr *chaosWriter) step() {
	wr.mu.Lock()
	k := wr.k
	wr.mu.Unlock()
	id := fmt.Sprintf("watched-%d", k/2)
	register := k%2 == 0
	if !register {
		id = fmt.Sprintf("watched-%d", k/2-2)
		if k/2-2 < 0 {
			wr.mu.Lock()
			wr.k++
			wr.mu.Unlock()
			return
		}
	}
	gone := 0
	for _, n := range nodes {
		base := strings.Replace(nodeBase, "127.0.0.1:8761", "127.0.0.1:"+publishedPorts[n], 1) + "/eureka/apps/WATCHED"
		var code int
		if register {
			code = post(base, watchedInstance(id))
		} else {
			code = do("DELETE", base+"/"+id)
		}
		if code == 404 {
			gone++
		}
		if code == 204 || code == 200 || gone == len(nodes) {
			wr.mu.Lock()
			if register {
				wr.live[id] = true
			} else {
				delete(wr.live, id)
			}
			wr.k++
			wr.n++
			wr.mu.Unlock()
			return
		}
	}
}

func watchedInstance(id string) string {
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":%q,"app":"WATCHED","ipAddr":"10.9.8.1",
"status":"UP","port":{"$":80,"@enabled":"true"},
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":3600,"durationInSecs":3600}}}`, id, id)
}

// watchedOn returns the WATCHED instance ids node holds, sorted; none when
// it answers 404.
func watchedOn(ctx context.Context, b *bench, node string) ([]string, error) {
	body, err := b.get(ctx, node, nodeBase+"/eureka/apps/WATCHED")
	if err != nil {
		if strings.Contains(err.Error(), "HTTP 404") {
			return nil, nil
		}
		return nil, err
	}
	var ids []string
	for _, m := range instanceIDs.FindAllSubmatch(body, -1) {
		ids = append(ids, string(m[1]))
	}
	slices.Sort(ids)
	return ids, nil
}

var instanceIDs = regexp.MustCompile(`<instanceId>([^<]+)</instanceId>`)

func nodeOfURL(u string) string {
	for n, port := range publishedPorts {
		if strings.Contains(u, ":"+port+"/") {
			return n
		}
	}
	return u
}
