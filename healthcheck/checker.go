package healthcheck

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
)

// Registry is what the checker needs of the registry: a snapshot to pick
// instances from, the instances whose clients talk to this node (without a
// cluster), and the write of its marks. *registry.Registry implements it.
type Registry interface {
	Snapshot() *registry.Snapshot
	ClientLive() []*registry.Instance
	Apply(registry.Op) (*registry.Instance, error)
}

// Options are the checker's collaborators.
type Options struct {
	Registry Registry
	// Self is this node's name, as Members names it.
	Self string
	// Members lists the live cluster members' names, this node's
	// included. nil means no gossip cluster: each node probes the
	// instances whose clients register and renew through it.
	Members func() []string
	// OwnAddrs lists the node's own addresses (nil: the host's interface
	// addresses) and OwnPorts the ports it listens on (API, management,
	// DNS, gossip): never probed.
	OwnAddrs func() []netip.Addr
	OwnPorts func() []uint16
	// Metrics is where the collectors are registered (nil: none).
	Metrics prometheus.Registerer
}

// Checker probes the instances this node owns, one round per interval.
type Checker struct {
	cfg    Config
	opt    Options
	log    zerolog.Logger
	now    func() time.Time
	rand   *rand.Rand
	apps   map[string]bool
	all    bool
	prober *prober
	m      *metrics

	// roundMu serialises rounds (Run's and a test's).
	roundMu sync.Mutex
	// mu guards states, guarded and last; rounds replace them whole.
	mu      sync.Mutex
	states  map[registry.InstanceKey]*state
	guarded map[string]bool
	last    RoundResult

	rounds atomic.Uint64
}

// state is what this node knows of one instance it probes.
type state struct {
	// inst, mode and parsed are the stored instance the target was parsed
	// from, and the target before the address rules.
	inst       *registry.Instance
	mode       Mode
	parsed     target
	target     target
	failures   int // failed rounds in a row
	successes  int // passed rounds in a row
	down       bool
	reason     string
	since      time.Time // when down, or when the current streak began
	lastResult string
	lastAt     time.Time
	lastOK     bool
}

// New returns a checker; it starts nothing.
func New(cfg Config, opt Options) (*Checker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt.Registry == nil {
		return nil, errors.New("healthcheck: no registry")
	}
	c := &Checker{cfg: cfg, opt: opt, now: cfg.Now, rand: cfg.Rand, apps: map[string]bool{},
		states: map[registry.InstanceKey]*state{}, guarded: map[string]bool{}}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rand == nil {
		c.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	for _, a := range cfg.Apps {
		a = strings.TrimSpace(a)
		if a == "*" {
			c.all = true
		}
		c.apps[strings.ToUpper(a)] = true
	}
	c.log = cfg.Logger.With().Str(logComponent, "healthcheck").Logger()
	c.prober = newProber(cfg.Timeout)
	c.m = newMetrics(opt.Metrics)
	return c, nil
}

// Run runs a round every Interval (±10 %), start to start, until ctx
// ends; a round that takes longer than that is followed by the next at
// once.
func (c *Checker) Run(ctx context.Context) {
	next := time.Now()
	for {
		jitter := time.Duration((c.rand.Float64()*0.2 - 0.1) * float64(c.cfg.Interval))
		next = next.Add(c.cfg.Interval + jitter)
		t := time.NewTimer(max(time.Until(next), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if now := time.Now(); now.After(next) {
			next = now
		}
		c.Round(ctx)
	}
}

// RoundResult is what one round did.
type RoundResult struct {
	At       time.Time
	Took     time.Duration
	Members  int // members the ownership was computed over (0: ClientLive)
	Owned    int // instances this node is responsible for
	Probed   int // probes run
	Failed   int // probes that failed
	Refused  int // instances not probed: their target breaks the rules
	Marked   int // marks set this round
	Lifted   int // marks lifted this round
	Guarded  []string
	Errors   int // marks that could not be written
	Verdicts map[registry.InstanceKey]bool
}

type job struct {
	key    registry.InstanceKey
	inst   *registry.Instance
	st     *state
	ok     bool
	result string
}

// Round probes every instance this node owns once and applies the
// verdicts. Tests call it directly, with the registry's clock moved by a
// whole interval between rounds.
func (c *Checker) Round(ctx context.Context) RoundResult {
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	start := time.Now()
	now := c.now()
	res := RoundResult{At: now}
	snap := c.opt.Registry.Snapshot()
	owns := c.ownership(&res)
	own := c.ownAddrs()

	c.mu.Lock()
	prev := c.states
	c.mu.Unlock()
	states := make(map[registry.InstanceKey]*state, len(prev))

	var jobs []*job
	var lifts []registry.InstanceKey
	eligible := map[string]int{} // app → instances probed by health checks, cluster-wide
	markedOthers := map[string]int{}
	marked := 0
	for _, app := range snap.Apps {
		for i := range app.Instances {
			in := app.Instances[i].Instance
			if in.Health != nil {
				marked++
			}
			m := c.modeOf(in)
			probeable := m != ModeOff && (in.ClientStatus() == registry.StatusUp || in.Health != nil)
			key := registry.InstanceKey{App: app.Name, ID: in.ID()}
			if probeable {
				eligible[app.Name]++
			}
			if !owns(key) {
				if in.Health != nil && probeable {
					markedOthers[app.Name]++
				}
				continue
			}
			if !probeable {
				if in.Health != nil {
					lifts = append(lifts, key) // no longer probed: its mark goes
				}
				continue
			}
			res.Owned++
			// The URL is parsed again only when the instance changed (a
			// stored instance is immutable: same pointer, same fields);
			// the address rules run every round, the node's addresses may
			// have changed.
			p := prev[key]
			var parsed target
			if p != nil && p.inst == in && p.mode == m {
				parsed = p.parsed
			} else {
				parsed = c.targetOf(in, m)
			}
			t := parsed
			if t.refused == "" {
				t.refused = c.checkAddr(t.addr, own)
			}
			var st *state
			if p != nil && p.target == t {
				cp := *p // Report reads the previous round's states meanwhile
				st = &cp
			} else {
				// New here (or its target moved): start from what the
				// registry says, so a takeover keeps a mark in force.
				st = &state{target: t, since: now}
				if in.Health != nil {
					st.down, st.reason, st.since = true, in.Health.Reason, time.UnixMilli(in.Health.Since)
				}
			}
			st.inst, st.mode, st.parsed = in, m, parsed
			states[key] = st
			if t.refused != "" {
				res.Refused++
				eligible[app.Name]--
				st.lastResult, st.lastAt, st.lastOK = "not probed: "+t.refused, now, false
				st.down, st.failures, st.successes = false, 0, 0
				if in.Health != nil {
					lifts = append(lifts, key) // a mark nobody can verify goes
				}
				continue
			}
			jobs = append(jobs, &job{key: key, inst: in, st: st})
		}
	}
	c.m.refused.Add(float64(res.Refused))
	c.m.marked.Set(float64(marked))

	c.probeAll(ctx, jobs)
	if ctx.Err() != nil {
		return res // shutting down: no verdicts from cancelled probes
	}
	res.Probed = len(jobs)

	// The guard: per app, the instances that would be down by health
	// checks if this round marked its failures, over the app's probed
	// instances cluster-wide.
	failing := map[string]int{}
	for _, j := range jobs {
		if !j.ok {
			res.Failed++
			failing[j.key.App]++
		}
	}
	guarded := map[string]bool{}
	for app, n := range failing {
		if e := eligible[app]; e > 0 && (n+markedOthers[app])*100 > c.cfg.MaxDownPercent*e {
			guarded[app] = true
		}
	}

	res.Verdicts = make(map[registry.InstanceKey]bool, len(jobs))
	for _, j := range jobs {
		st := j.st
		st.lastResult, st.lastAt, st.lastOK = j.result, now, j.ok
		if j.ok {
			if st.successes == 0 {
				st.since = now
			}
			st.successes++
			st.failures = 0
			if st.down && st.successes >= c.cfg.SuccessesBeforeUp {
				st.down, st.since = false, now
			}
		} else {
			if st.failures == 0 && !st.down {
				st.since = now
			}
			st.failures++
			st.successes = 0
			if !st.down && st.failures >= c.cfg.FailuresBeforeDown && !guarded[j.key.App] {
				st.down, st.reason, st.since = true, j.result, now
			}
		}
		res.Verdicts[j.key] = !st.down
		if st.down == (j.inst.Health != nil) {
			continue
		}
		var mark *registry.HealthMark
		if st.down {
			mark = &registry.HealthMark{Reason: st.reason, Since: st.since.UnixMilli(), By: c.opt.Self}
		}
		if c.write(j.key, mark) {
			if st.down {
				res.Marked++
				c.m.flips.WithLabelValues("down").Inc()
			} else {
				res.Lifted++
				c.m.flips.WithLabelValues("up").Inc()
			}
		} else {
			res.Errors++
		}
	}
	for _, key := range lifts {
		if c.write(key, nil) {
			res.Lifted++
			c.m.flips.WithLabelValues("up").Inc()
		} else {
			res.Errors++
		}
	}

	c.mu.Lock()
	for app := range guarded {
		if !c.guarded[app] {
			c.m.activations.Inc()
			c.m.guarded.WithLabelValues(app).Set(1)
			c.log.Warn().Str(logApp, app).Int(logFailing, failing[app]).Int(logProbed, eligible[app]).
				Int(logMaxDownPercent, c.cfg.MaxDownPercent).
				Msg("health-check guard on: too many instances of the app fail at once, none is marked down")
		}
		res.Guarded = append(res.Guarded, app)
	}
	for app := range c.guarded {
		if !guarded[app] {
			c.m.guarded.DeleteLabelValues(app)
			c.log.Info().Str(logApp, app).Msg("health-check guard off")
		}
	}
	sort.Strings(res.Guarded)
	res.Took = time.Since(start)
	c.states, c.guarded, c.last = states, guarded, res
	c.mu.Unlock()
	c.m.probed.Set(float64(res.Probed))
	c.m.round.Set(res.Took.Seconds())
	c.rounds.Add(1)
	if res.Marked+res.Lifted > 0 {
		c.log.Info().Int(logMarked, res.Marked).Int(logLifted, res.Lifted).Int(logProbed, res.Probed).Msg("health-check round")
	}
	return res
}

// write sets or lifts key's mark; false when the registry refused.
func (c *Checker) write(key registry.InstanceKey, mark *registry.HealthMark) bool {
	_, err := c.opt.Registry.Apply(registry.HealthOp(key.App, key.ID, mark))
	if err != nil && !errors.Is(err, registry.ErrInstanceNotFound) {
		c.log.Warn().Err(err).Str(logApp, key.App).Str(logInstanceID, key.ID).Msg("health-check mark not written")
		return false
	}
	return err == nil
}

// probeAll runs the jobs' probes, at most MaxConcurrent at once.
func (c *Checker) probeAll(ctx context.Context, jobs []*job) {
	workers := min(c.cfg.MaxConcurrent, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each probe's timeout context hangs under this worker's
			// own: registering and removing it then locks this context
			// alone, not the round's, which all the workers share.
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				j := jobs[i]
				t0 := time.Now()
				j.ok, j.result = c.prober.probe(ctx, j.st.target)
				c.m.latency.Observe(time.Since(t0).Seconds())
				c.m.probe(j.st.target.mode, j.ok)
			}
		}()
	}
	wg.Wait()
}

// ownership returns whether this node probes a key, for this round.
func (c *Checker) ownership(res *RoundResult) func(registry.InstanceKey) bool {
	if c.opt.Members == nil {
		live := map[registry.InstanceKey]bool{}
		for _, in := range c.opt.Registry.ClientLive() {
			live[registry.InstanceKey{App: in.App, ID: in.ID()}] = true
		}
		return func(k registry.InstanceKey) bool { return live[k] }
	}
	members := c.opt.Members()
	res.Members = len(members)
	return func(k registry.InstanceKey) bool { return Owner(members, k) == c.opt.Self }
}

// OwnerOf names the node that probes key as this node sees it: a member
// name with a cluster; without one, this node's name when a client of the
// instance talks to it, else "".
func (c *Checker) OwnerOf(key registry.InstanceKey) string {
	if c.opt.Members == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.states[key] != nil {
			return c.opt.Self
		}
		return ""
	}
	return Owner(c.opt.Members(), key)
}

func (c *Checker) ownAddrs() ownAddrs {
	own := ownAddrs{addrs: map[netip.Addr]bool{}, ports: map[uint16]bool{}}
	var addrs []netip.Addr
	if c.opt.OwnAddrs != nil {
		addrs = c.opt.OwnAddrs()
	} else {
		addrs = InterfaceAddrs()
	}
	for _, a := range addrs {
		own.addrs[a.Unmap()] = true
	}
	if c.opt.OwnPorts != nil {
		for _, p := range c.opt.OwnPorts() {
			own.ports[p] = true
		}
	}
	return own
}

// InterfaceAddrs lists the host's interface addresses.
func InterfaceAddrs() []netip.Addr {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// Dials counts every connection a probe attempted since the start.
func (c *Checker) Dials() uint64 { return c.prober.dials.Load() }

// Rounds counts the rounds run.
func (c *Checker) Rounds() uint64 { return c.rounds.Load() }
