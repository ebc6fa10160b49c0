package simclient

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/client"
)

// ErrAlreadyRun is returned by a second call of Run.
var ErrAlreadyRun = errors.New("simclient: fleet already run")

// Fleet is a group of simulated Eureka client instances that share one
// client.Client (one HTTP client, one server list, one current server) and
// one registry view, like the instances of one Java process would (see
// doc.go).
type Fleet struct {
	cfg   Config
	log   zerolog.Logger
	now   func() time.Time
	http  *http.Client
	api   *client.Client
	stats counters
	ran   atomic.Bool

	// insts are the instances; each is owned by one goroutine at a time
	// (see instance).
	insts []instance
	// view is owned by the fetch goroutine.
	view view
}

// New validates cfg and builds the fleet's instances. It sends nothing and
// starts no goroutine; Run does.
func New(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Zone == "" {
		cfg.Zone = DefaultZone
	}
	f := &Fleet{cfg: cfg, now: cfg.Now, http: cfg.HTTPClient}
	if f.now == nil {
		f.now = time.Now
	}
	if f.http == nil {
		f.http = newHTTPClient(cfg)
	}
	f.log = cfg.Logger.With().Str("component", "simclient").Str("id_prefix", cfg.IDPrefix).Logger()
	api, err := newAPIClient(cfg, f.http, f.now)
	if err != nil {
		return nil, fmt.Errorf("simclient: %w", err)
	}
	f.api = api
	f.insts = buildInstances(cfg, f.now())
	return f, nil
}

// Run registers every instance (Workers at a time), then renews each one
// every RenewalInterval and fetches the registry every FetchInterval, until
// ctx ends; then it cancels every registered instance (within
// CancelTimeout) and returns. Instances whose registration failed are
// registered again at their renewal time instead of renewing. Run returns
// nil after a normal shutdown; it may be called once.
func (f *Fleet) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	var wg sync.WaitGroup
	if !f.cfg.FetchDisabled {
		wg.Go(func() { f.fetchLoop(ctx) })
	}
	f.registerAll(ctx)
	if ctx.Err() == nil {
		f.renewLoop(ctx)
	}
	wg.Wait()

	cctx, cancel := context.WithTimeout(context.Background(), f.cfg.CancelTimeout)
	defer cancel()
	f.cancelAll(cctx)
	return nil
}

// forEach runs fn for every instance index, Workers at a time, until ctx
// ends.
func (f *Fleet) forEach(ctx context.Context, fn func(ctx context.Context, i int)) {
	idx := make(chan int)
	var wg sync.WaitGroup
	for range min(f.cfg.Workers, len(f.insts)) {
		wg.Go(func() {
			for i := range idx {
				fn(ctx, i)
			}
		})
	}
feed:
	for i := range f.insts {
		select {
		case idx <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(idx)
	wg.Wait()
}

// registerAll registers every instance in parallel and logs the pace.
func (f *Fleet) registerAll(ctx context.Context) {
	if len(f.insts) == 0 {
		return
	}
	start := time.Now()
	before := f.stats.registrations.Load()
	f.forEach(ctx, func(ctx context.Context, i int) { f.register(ctx, i) })
	elapsed := time.Since(start)
	ok := f.stats.registrations.Load() - before
	rate := float64(ok) / math.Max(elapsed.Seconds(), 1e-9)
	f.stats.registrationRate.Store(math.Float64bits(rate))
	f.log.Info().Uint64("registered", ok).Int("instances", len(f.insts)).Dur("elapsed", elapsed).
		Float64("per_second", math.Round(rate)).Msg("registration phase done")
}

// register sends instance i's registration (POST apps/<APP>).
func (f *Fleet) register(ctx context.Context, i int) bool {
	in := &f.insts[i]
	err := f.api.RegisterOnce(ctx, in.inst, time.UnixMilli(in.lastDirty))
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		f.stats.registrationFailures.Add(1)
		f.log.Debug().Str("instance_id", in.inst.ID).Err(err).Msg("registration failed")
		return false
	}
	f.stats.registrations.Add(1)
	if !in.registered {
		in.registered = true
		f.stats.registered.Add(1)
	}
	return true
}

// renew is instance i's renewal round: a heartbeat (PUT
// apps/<APP>/<id>?status=UP&lastDirtyTimestamp=…), retried once on the
// next server. On 404 the instance marks itself dirty and registers again,
// as DiscoveryClient#renew does. An instance that is not registered (its
// registration failed) registers instead.
func (f *Fleet) renew(ctx context.Context, i int) {
	in := &f.insts[i]
	if !in.registered {
		f.register(ctx, i)
		return
	}
	err := f.api.Heartbeat(ctx, in.inst.App, in.inst.ID, client.StatusUp, time.UnixMilli(in.lastDirty))
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, client.ErrNotRegistered):
		f.stats.reRegistrations.Add(1)
		// InstanceInfo#setIsDirtyWithTime: the new registration carries a
		// newer lastDirtyTimestamp, so the server takes it over any copy
		// it still holds.
		in.lastDirty = max(f.now().UnixMilli(), in.lastDirty+1)
		in.registered = false
		f.stats.registered.Add(-1)
		f.register(ctx, i)
	case err != nil:
		f.stats.renewalsFailed.Add(1)
		f.log.Debug().Err(err).Str("instance_id", in.inst.ID).Msg("renewal failed")
	default:
		f.stats.renewalsOK.Add(1)
	}
}

// renewLoop runs the renewal schedule (schedule.go) until ctx ends.
func (f *Fleet) renewLoop(ctx context.Context) {
	n := len(f.insts)
	if n == 0 {
		<-ctx.Done()
		return
	}
	interval := f.cfg.RenewalInterval
	start := time.Now()
	items := make([]dueItem, n)
	for i := range items {
		items[i] = dueItem{due: initialDue(start, i, n, interval), idx: i}
	}
	sched := newSchedule(items)
	jobs := make(chan dueItem)
	var wg sync.WaitGroup
	for range min(f.cfg.Workers, n) {
		wg.Go(func() {
			for it := range jobs {
				f.renew(ctx, it.idx)
				sched.push(dueItem{due: nextDue(it.due, time.Now(), interval), idx: it.idx})
			}
		})
	}
	sched.run(ctx, jobs)
	close(jobs)
	wg.Wait()
}

// cancelAll cancels every registered instance (DELETE apps/<APP>/<id>),
// Workers at a time, until ctx ends. Only 200 counts in Cancels; a 404
// (the server no longer has the instance) counts in CancelFailures, and a
// 5xx is retried on the next server.
func (f *Fleet) cancelAll(ctx context.Context) {
	if f.stats.registered.Load() == 0 {
		return
	}
	start := time.Now()
	f.forEach(ctx, func(ctx context.Context, i int) {
		in := &f.insts[i]
		if !in.registered {
			return
		}
		err := f.api.Cancel(ctx, in.inst.App, in.inst.ID)
		if ctx.Err() != nil {
			return // out of time: still registered, the lease will expire
		}
		if err == nil {
			f.stats.cancels.Add(1)
		} else {
			f.stats.cancelFailures.Add(1)
		}
		in.registered = false
		f.stats.registered.Add(-1)
	})
	s := f.Stats()
	ev := f.log.Info()
	if ctx.Err() != nil {
		ev = f.log.Warn()
	}
	ev.Uint64("cancelled", s.Cancels).Uint64("failed", s.CancelFailures).Int("left", s.Registered).
		Dur("elapsed", time.Since(start)).Msg("cancelled instances")
}
