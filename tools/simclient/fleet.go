package simclient

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// ErrAlreadyRun is returned by a second call of Run.
var ErrAlreadyRun = errors.New("simclient: fleet already run")

// Fleet is a group of simulated Eureka client instances that share one
// HTTP client, one server list and one registry view, like the instances
// of one Java process would (see doc.go).
type Fleet struct {
	cfg     Config
	log     zerolog.Logger
	now     func() time.Time
	client  *http.Client
	servers *serverSet
	stats   counters
	ran     atomic.Bool

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
	f := &Fleet{
		cfg:     cfg,
		now:     cfg.Now,
		client:  cfg.HTTPClient,
		servers: newServerSet(cfg.Servers, cfg.Zone),
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.client == nil {
		f.client = newHTTPClient(cfg)
	}
	f.log = cfg.Logger.With().Str("component", "simclient").Str("id_prefix", cfg.IDPrefix).Logger()
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
	if f.cfg.ZoneRetryInterval > 0 && len(f.servers.list) > 1 {
		wg.Go(func() { f.zoneLoop(ctx) })
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

// register sends instance i's registration (POST apps/<APP>); only 204
// counts as success, as in DiscoveryClient#register.
func (f *Fleet) register(ctx context.Context, i int) bool {
	in := &f.insts[i]
	body := wire.AppendInstanceJSON(make([]byte, 0, 1024), registry.InstanceView{Instance: in.inst})
	rep, err := f.call(ctx, opRegister, http.MethodPost, "apps/"+in.inst.App, body)
	if ctx.Err() != nil {
		return false
	}
	if err != nil || rep.code != http.StatusNoContent {
		f.stats.registrationFailures.Add(1)
		ev := f.log.Debug().Str("instance_id", in.inst.InstanceID)
		if err != nil {
			ev.Err(err)
		} else {
			ev.Int("status", rep.code)
		}
		ev.Msg("registration failed")
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
	path := in.path + "?status=UP&lastDirtyTimestamp=" + strconv.FormatInt(in.inst.LastDirtyTimestamp, 10)
	rep, err := f.call(ctx, opRenew, http.MethodPut, path, nil)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		f.stats.renewalsFailed.Add(1)
		f.log.Debug().Err(err).Str("instance_id", in.inst.InstanceID).Msg("renewal failed")
	case rep.code == http.StatusNotFound:
		f.stats.reRegistrations.Add(1)
		// InstanceInfo#setIsDirtyWithTime: the new registration carries a
		// newer lastDirtyTimestamp, so the server takes it over any copy
		// it still holds.
		c := in.inst.Clone()
		c.LastDirtyTimestamp = max(f.now().UnixMilli(), c.LastDirtyTimestamp+1)
		c.LastUpdatedTimestamp = c.LastDirtyTimestamp
		in.inst = c
		in.registered = false
		f.stats.registered.Add(-1)
		f.register(ctx, i)
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
// Workers at a time, until ctx ends. Any answer ends an instance's
// cancel, as in the Java client (a 404 means the server no longer has it);
// only 200 counts in Cancels.
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
		rep, err := f.call(ctx, opCancel, http.MethodDelete, in.path, nil)
		if ctx.Err() != nil {
			return // out of time: still registered, the lease will expire
		}
		if err == nil && rep.code == http.StatusOK {
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

// zoneLoop moves back to the first server every ZoneRetryInterval.
func (f *Fleet) zoneLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.ZoneRetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f.servers.returnHome() {
				f.stats.zoneReturns.Add(1)
				_, srv := f.servers.current()
				f.log.Info().Str("to", srv.Redacted()).Msg("returning to the first server of the zone")
			}
		}
	}
}
