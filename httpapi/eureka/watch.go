package eureka

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
)

// watchHub knows the version of every view a blocking fetch can wait on and
// wakes the requests waiting on it. One goroutine feeds it from one
// registry Cursor, outside every registry lock.
//
// Versions: the registry's (the Seq of the newest change) for the full
// registry, the delta and VIPs; per app, the Seq of that app's newest
// change, so that a watcher of one app is woken by that app only. The hub
// follows the change stream a little behind the registry, so it only
// wakes: the index a read answers with, and the one a held request is
// compared with, come from the registry's snapshot (getApp, holdApp,
// holdRegistry), never from the hub, whose version may be older than the
// body a client was given.
//
// Waiters: a held request waits on a channel that the hub closes at the
// view's next change: one channel per app with waiters, shared by all of
// them, and one for any change. An idle watcher is a parked goroutine and
// a slot in no list; a change costs one close per app changed, however
// many wait on it.
type watchHub struct {
	reg    Registry
	cursor *registry.Cursor
	log    zerolog.Logger

	// mu guards processed, apps and anyChange.
	mu        sync.Mutex
	processed uint64                 // Seq of the newest change applied
	apps      map[string]*appVersion // by upper-case app name
	anyChange chan struct{}          // closed at the next change; nil when none waits

	stop      chan struct{} // closed by close: held requests answer, streams end
	stopOnce  sync.Once
	startOnce sync.Once     // the feed starts with the first watch (start)
	done      chan struct{} // the feeding goroutine has ended

	// figures for /metrics
	held      atomic.Int64  // blocking fetches waiting now
	streams   atomic.Int64  // watch streams open now
	overLimit atomic.Uint64 // blocking fetches answered at once, max-watchers reached
	wakeups   atomic.Uint64 // held requests answered because their view changed
	timeouts  atomic.Uint64 // held requests answered when their wait passed
	resyncs   atomic.Uint64 // resyncs of the hub itself (it fell behind the outbox)
	sseResync atomic.Uint64 // resync events sent on watch streams
}

type appVersion struct {
	seq     uint64
	changed chan struct{} // closed at the app's next change; nil when none waits
	waiters int           // held requests on this app now
}

func newWatchHub(reg Registry, log zerolog.Logger) *watchHub {
	h := &watchHub{
		reg:    reg,
		log:    log,
		apps:   map[string]*appVersion{},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		cursor: reg.Subscribe(),
	}
	// Changes before the hub subscribed have no known app: count them all
	// as now, which wakes nobody and only makes a client's first index
	// conservative.
	h.rebuild()
	return h
}

// start starts the feed, once: at the first blocking fetch or index read,
// so that building the API starts nothing. Changes before it are counted
// as now, as those before the subscription are (or, if the cursor fell
// behind meanwhile, by a resync): a first index may be conservative, no
// change is missed by a waiter.
func (h *watchHub) start() { h.startOnce.Do(func() { go h.run() }) }

// close ends the feed and releases every held request and watch stream.
func (h *watchHub) close() {
	h.stopOnce.Do(func() {
		close(h.stop)
		h.startOnce.Do(func() { // never started: nothing runs to end
			h.cursor.Close()
			close(h.done)
		})
		<-h.done
	})
}

func (h *watchHub) stopped() <-chan struct{} { return h.stop }

func (h *watchHub) run() {
	defer close(h.done)
	defer h.cursor.Close()
	buf := make([]registry.Event, 0, 512)
	for {
		select {
		case <-h.stop:
			return
		case <-h.cursor.Ready():
		}
		for {
			events, resync := h.cursor.Read(buf)
			if resync {
				h.resyncs.Add(1)
				h.log.Warn().Msg("watch hub fell behind the change stream; every watcher is woken")
				h.rebuild()
				continue
			}
			if len(events) == 0 {
				break
			}
			h.apply(events)
		}
	}
}

// apply records a batch of events and wakes their waiters.
func (h *watchHub) apply(events []registry.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range events {
		ev := &events[i]
		name := ev.Key.App
		a := h.apps[name]
		if a == nil {
			if n := strings.ToUpper(name); n != name {
				name = n
				a = h.apps[name]
			}
			if a == nil {
				a = &appVersion{}
				h.apps[name] = a
			}
		}
		a.seq = ev.Seq
		if a.changed != nil {
			close(a.changed)
			a.changed = nil
		}
		h.processed = ev.Seq
	}
	if h.anyChange != nil {
		close(h.anyChange)
		h.anyChange = nil
	}
	clear(events) // the instances are the registry's; do not pin them
}

// rebuild starts over from the registry's current state, after the hub
// fell behind: every app seen or present gets the current version (a
// change it may have missed), which answers every waiter.
func (h *watchHub) rebuild() {
	snap := h.reg.Snapshot()
	h.mu.Lock()
	defer h.mu.Unlock()
	v := max(snap.Version, h.processed)
	for _, app := range snap.Apps {
		if h.apps[app.Name] == nil {
			h.apps[app.Name] = &appVersion{}
		}
	}
	for _, a := range h.apps {
		a.seq = v
		if a.changed != nil {
			close(a.changed)
			a.changed = nil
		}
	}
	h.processed = v
	if h.anyChange != nil {
		close(h.anyChange)
		h.anyChange = nil
	}
}

// waitApp returns a channel closed at app's next change that the hub
// applies; it must be followed by releaseApp. Whether the app is still at
// the index a client sent is the caller's question (holdApp asks the
// registry's snapshot, not the hub, which may be behind it).
func (h *watchHub) waitApp(app string) <-chan struct{} {
	h.start()
	name := strings.ToUpper(app)
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.apps[name]
	if a == nil {
		// An app this node has not seen change: remember it, so its first
		// change wakes this waiter (releaseApp forgets it again).
		a = &appVersion{}
		h.apps[name] = a
	}
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	a.waiters++
	return a.changed
}

// releaseApp ends one waitApp. An app that has never changed is forgotten
// with its last waiter: names come from clients, and waits on made-up
// names must leave nothing behind.
func (h *watchHub) releaseApp(app string) {
	name := strings.ToUpper(app)
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.apps[name]
	if a == nil {
		return
	}
	a.waiters--
	if a.waiters <= 0 && a.seq == 0 {
		delete(h.apps, name)
	}
}

// waitAny returns a channel closed at the next change after version, or
// nil when the hub has applied changes past it already.
func (h *watchHub) waitAny(version uint64) <-chan struct{} {
	h.start()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.processed > version {
		return nil
	}
	if h.anyChange == nil {
		h.anyChange = make(chan struct{})
	}
	return h.anyChange
}

// timer is the clock a held request waits on: a channel that receives after
// d, and a function that releases it.
type timer func(d time.Duration) (<-chan time.Time, func())

func realTimer(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

func (h *watchHub) collectors() []prometheus.Collector {
	gauge := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	counter := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		gauge("muster_watch_held_requests", "Blocking fetches held now, waiting for a change.", &h.held),
		gauge("muster_watch_streams", "Watch streams (GET /eureka/watch) open now.", &h.streams),
		counter("muster_watch_over_limit_total", "Blocking fetches answered at once and watch streams refused because muster.watch.max-watchers was reached.", &h.overLimit),
		counter("muster_watch_wakeups_total", "Held blocking fetches answered because what they watch changed.", &h.wakeups),
		counter("muster_watch_timeouts_total", "Held blocking fetches answered unchanged when their wait passed.", &h.timeouts),
		counter("muster_watch_stream_resyncs_total", "Resync events sent on watch streams (a reader resumed too far back or fell behind).", &h.sseResync),
		counter("muster_watch_hub_resyncs_total", "Times the watch hub fell behind the change stream and woke every watcher.", &h.resyncs),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "muster_watch_hub_lag", Help: "Changes the watch hub has not applied yet."},
			func() float64 {
				h.mu.Lock()
				p := h.processed
				h.mu.Unlock()
				v := h.reg.Version()
				if v < p {
					return 0
				}
				return float64(v - p)
			}),
	}
}
