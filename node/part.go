package node

import (
	"context"
	"errors"
	"sync"

	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/regions"
	"github.com/muster-registry/muster/report"
	"github.com/muster-registry/muster/xds"
)

// A part is one thing a node runs: the HTTP server, the cluster,
// replication, anti-entropy, the snapshots, the self-registration, DNS,
// xDS, the health checks, the remote regions. Every part has one life:
//
//  1. built from the settings and the narrow interfaces it consumes
//     (newParts), starting nothing and opening nothing;
//  2. Start, which returns once the part runs. Its ctx lives as long as
//     the node's background work: it is not the caller's, so a signal
//     that ends the caller's context starts a Shutdown and does not pull
//     the parts from under it;
//  3. Stop, which returns once the part has stopped; ctx bounds a
//     graceful stop (Shutdown's deadline). Only a part that started is
//     stopped, once.
//
// The node keeps its parts in one ordered list (newParts): they start in
// order and stop in reverse, and a Start that fails stops, in reverse,
// what it had started (as etcd's embed.StartEtcd; coredns's OnStartup and
// OnShutdown). A part that needs the registry synced and open for traffic
// says so in its entry (atOpen) and starts at that step of startUp,
// rather than waiting for it itself. Adding a part is one entry in the
// list; the part's own package does the work.
type part interface {
	Name() string
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// reporter is the rest of the contract, for a part with something to
// show on /admin/status and the console: its package's type reports
// itself in package report's plain types (Report), and newAPI hands that
// method to the HTTP server as it is. node converts nothing; a new report
// is a type in package report, its part's Report and a field of ops'
// document. (The peers' report stays the node's: it joins the members,
// the static peers, replication and anti-entropy.)
type reporter[T any] interface {
	Report() T
}

var (
	_ reporter[*report.HealthChecks]  = (*healthcheck.Checker)(nil)
	_ reporter[[]report.XDSClient]    = (*xds.Server)(nil)
	_ reporter[[]report.RemoteRegion] = (*regions.Set)(nil)
)

// step is when a part starts.
type step int

const (
	atStart step = iota // in Node.Start
	atOpen              // once the node opens for traffic, after syncUp (startUp)
)

// entry is one part in the node's list.
type entry struct {
	part
	at step
}

// parts is the node's ordered list and which of them run.
type parts struct {
	list []entry
	// mu guards started and closed: Start and startUp (a goroutine)
	// start parts, Shutdown stops them.
	mu      sync.Mutex
	started []bool // by index in list
	closed  bool   // stopping: nothing starts any more
}

// start starts, in list order, the parts of step at, unless the node is
// stopping; first, when set, runs before them under the same lock (the
// opening for traffic: a node being shut down must not open). The first
// error ends it; stop stops what started.
func (ps *parts) start(ctx context.Context, at step, first func()) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	if ps.started == nil {
		ps.started = make([]bool, len(ps.list))
	}
	if first != nil {
		first()
	}
	for i, e := range ps.list {
		if e.at != at {
			continue
		}
		if err := e.Start(ctx); err != nil {
			return err
		}
		ps.started[i] = true
	}
	return nil
}

// close says the node is stopping: no part starts after it. It reports
// whether it was the first call.
func (ps *parts) close() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	first := !ps.closed
	ps.closed = true
	return first
}

// stop stops, in reverse list order, every part that started; call close
// first. It returns every part's error.
func (ps *parts) stop(ctx context.Context) error {
	ps.mu.Lock()
	var running []part
	for i := len(ps.started) - 1; i >= 0; i-- {
		if ps.started[i] {
			running = append(running, ps.list[i].part)
			ps.started[i] = false
		}
	}
	ps.mu.Unlock()
	var errs []error
	for _, p := range running {
		if err := p.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// task is a part that is one goroutine, run until its context ends.
type task struct {
	name string
	run  func(ctx context.Context)
	// before, when set, runs first on Stop, while run still runs (a
	// drain); after, when set, once run has returned (a last write).
	before func(ctx context.Context) error
	after  func()

	cancel context.CancelFunc
	done   chan struct{}
}

func (t *task) Name() string { return t.name }

func (t *task) Start(ctx context.Context) error {
	ctx, t.cancel = context.WithCancel(ctx)
	t.done = make(chan struct{})
	go func() {
		defer close(t.done)
		t.run(ctx)
	}()
	return nil
}

func (t *task) Stop(ctx context.Context) error {
	var err error
	if t.before != nil {
		err = t.before(ctx)
	}
	t.cancel()
	<-t.done
	if t.after != nil {
		t.after()
	}
	return err
}

// funcs is a part whose start and stop are calls into its package (a
// server with Start and Shutdown of its own).
type funcs struct {
	name  string
	start func(ctx context.Context) error
	stop  func(ctx context.Context) error
}

func (f *funcs) Name() string                    { return f.name }
func (f *funcs) Start(ctx context.Context) error { return f.start(ctx) }
func (f *funcs) Stop(ctx context.Context) error  { return f.stop(ctx) }
