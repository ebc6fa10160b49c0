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
	// PersistentCount is how many persistent instances the registry
	// holds: with checks off (Config.Enabled) and none, a round has
	// nothing to do and skips the snapshot.
	PersistentCount() int
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
	// probeJobs runs a round's probes: probeAll, or a stand-in in the
	// benchmark of a round's own work.
	probeJobs func(context.Context, []job)

	// roundMu serialises rounds (Run's and a test's), and guards slabs,
	// slab and jobs.
	roundMu sync.Mutex
	// slabs hold the states of the last two rounds: a round writes its
	// states into slabs[slab], the one whose states are no longer
	// published (Report reads the other's meanwhile), so that a round
	// allocates no states once the fleet's size is reached. jobs is the
	// last round's job list, cleared, for the next round to fill.
	slabs [2]stateSlab
	slab  int
	jobs  []job
	// mu guards states, guarded and last; rounds replace them whole.
	mu      sync.Mutex
	states  map[registry.InstanceKey]*state
	guarded map[string]bool
	last    RoundResult
}

// state is what this node knows of one instance it probes.
type state struct {
	// key is the instance's; inst and mode are the stored instance the
	// target was parsed from; addrRefused says that target.refused is the
	// address rules' (the target before them is target with no refusal),
	// not the parse's.
	key         registry.InstanceKey
	slot        int // its place in its round's slab
	inst        *registry.Instance
	mode        Mode
	addrRefused bool
	target      target
	streak
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
	c.probeJobs = c.probeAll
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
// whole interval between rounds. It orchestrates; the decisions are
// pure functions (verdict.go): fateOf picks what to probe, carryOver what
// an instance's state starts from, guardedApps the guard, and
// streak.next each probe's verdict.
func (c *Checker) Round(ctx context.Context) RoundResult {
	c.roundMu.Lock()
	defer c.roundMu.Unlock()
	start := time.Now()
	now := c.now()
	res := RoundResult{At: now}
	if !c.cfg.Enabled && c.opt.Registry.PersistentCount() == 0 {
		c.mu.Lock()
		idle := len(c.states) == 0 // else one more round forgets them
		c.mu.Unlock()
		if idle {
			return res
		}
	}
	owns := c.ownership(&res)
	c.mu.Lock()
	prev := c.states
	c.mu.Unlock()
	p := c.plan(c.opt.Registry.Snapshot(), owns, c.ownAddrs(), prev, now)
	res.Owned, res.Refused = p.owned, p.refused
	c.m.refused.Add(float64(res.Refused))
	c.m.marked.Set(float64(p.marked))

	c.probeJobs(ctx, p.jobs)
	defer func() { clear(p.jobs); c.jobs = p.jobs[:0] }()
	if ctx.Err() != nil {
		return res // shutting down: no verdicts from cancelled probes
	}
	res.Probed = len(p.jobs)
	failing := map[string]int{}
	for i := range p.jobs {
		if j := &p.jobs[i]; !j.ok {
			res.Failed++
			if !registry.IsPersistent(j.inst) {
				failing[j.key.App]++ // what the guard weighs (plan)
			}
		}
	}
	guarded := guardedApps(failing, p.eligible, p.markedOthers, c.cfg.MaxDownPercent)
	c.judge(p, guarded, now, &res)

	res.Took = time.Since(start)
	c.publish(&res, p.states, guarded, failing, p.eligible)
	c.slab ^= 1 // the states just published are read now: the next round writes into the other slab
	return res
}

// publish makes a round's states, guard and result the checker's, and
// reports them: the guard's changes in the log and its metrics.
func (c *Checker) publish(res *RoundResult, states map[registry.InstanceKey]*state, guarded map[string]bool, failing, eligible map[string]int) {
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
	c.states, c.guarded, c.last = states, guarded, *res
	c.mu.Unlock()
	c.m.probed.Set(float64(res.Probed))
	c.m.round.Set(res.Took.Seconds())
	if res.Marked+res.Lifted > 0 {
		c.log.Info().Int(logMarked, res.Marked).Int(logLifted, res.Lifted).Int(logProbed, res.Probed).Msg("health-check round")
	}
}

// roundPlan is what a round probes and lifts, and what the guard counts.
type roundPlan struct {
	jobs   []job
	lifts  []registry.InstanceKey // marks that go without a probe
	states map[registry.InstanceKey]*state
	// eligible counts, per app, the instances probed by health checks
	// cluster-wide; markedOthers those of them other nodes have marked.
	eligible, markedOthers map[string]int
	owned, refused         int
	marked                 int // instances marked in the snapshot
}

// plan walks the snapshot: the instances this node probes this round,
// each with its state carried over from prev, and the marks to lift.
// It probes and writes nothing.
func (c *Checker) plan(snap *registry.Snapshot, owns func(registry.InstanceKey, *registry.Instance) bool, own ownAddrs,
	prev map[registry.InstanceKey]*state, now time.Time) roundPlan {
	p := roundPlan{states: make(map[registry.InstanceKey]*state, len(prev)), jobs: c.jobs,
		eligible: map[string]int{}, markedOthers: map[string]int{}}
	states := &c.slabs[c.slab]
	states.reset()
	defer states.clearRest()
	// prev's states are the other slab's, in the order of the snapshot
	// they were planned from: while the fleet stays the same, instance i
	// of this snapshot finds its previous state at i there, with no map
	// lookup (two strings hashed); prev answers the others.
	prevSlab, hint := &c.slabs[c.slab^1], 0
	for _, app := range snap.Apps {
		for i := range app.Instances {
			in := app.Instances[i].Instance
			marked := in.Health != nil
			if marked {
				p.marked++
			}
			persistent := registry.IsPersistent(in)
			if !c.cfg.Enabled && !persistent {
				// Checks off: only persistent instances are probed, and
				// other nodes' marks are theirs to lift.
				continue
			}
			key := registry.InstanceKey{App: app.Name, ID: in.ID()}
			m := c.modeOf(in)
			f, eligible := fateOf(m, in.ClientStatus(), marked, owns(key, in))
			// The guard counts only instances whose heartbeats still speak
			// for them: a persistent one has no liveness but the probes, so
			// it is neither held back by the guard nor counted in it.
			if eligible && !persistent {
				p.eligible[app.Name]++
			}
			switch f {
			case fateOthers:
				if !persistent {
					p.markedOthers[app.Name]++
				}
				continue
			case fateNone:
				continue
			case fateLift:
				p.lifts = append(p.lifts, key)
				continue
			}
			p.owned++
			// The URL is parsed again only when the instance changed (a
			// stored instance is immutable: same pointer, same fields);
			// the address rules run every round, the node's addresses may
			// have changed.
			var old *state
			if ps := prevSlab.at(hint); ps != nil && ps.key == key {
				old, hint = ps, hint+1
			} else if old = prev[key]; old != nil {
				hint = old.slot + 1
			}
			var parsed target
			if old != nil && old.inst == in && old.mode == m {
				parsed = old.target
				if old.addrRefused {
					parsed.refused = ""
				}
			} else {
				parsed = c.targetOf(in, m)
			}
			t := parsed
			if t.refused == "" {
				t.refused = c.checkAddr(t.addr, own)
			}
			st := states.alloc()
			slot := st.slot
			*st = carryOver(old, t, in.Health, now)
			st.slot, st.key, st.inst, st.mode, st.addrRefused = slot, key, in, m, parsed.refused == "" && t.refused != ""
			p.states[key] = st
			if t.refused != "" {
				p.refused++
				if !persistent {
					p.eligible[app.Name]--
				}
				st.lastResult, st.lastAt, st.lastOK = "not probed: "+t.refused, now, false
				st.streak = streak{}
				if marked {
					p.lifts = append(p.lifts, key) // a mark nobody can verify goes
				}
				continue
			}
			p.jobs = append(p.jobs, job{key: key, inst: in, st: st})
		}
	}
	return p
}

// stateSlab holds one round's states in chunks, kept from one use to the
// next: a round takes its states from the slab whose states are no longer
// published. A chunk is never grown, so the states' addresses stay put.
type stateSlab struct {
	chunks [][]state
	n      int // states in use
	used   int // states in use at the previous reset
}

const slabChunk = 512

// reset starts a round: every state of the slab may be handed out again.
func (s *stateSlab) reset() { s.used, s.n = max(s.used, s.n), 0 }

// alloc hands out a state, zeroed.
func (s *stateSlab) alloc() *state {
	c, i := s.n/slabChunk, s.n%slabChunk
	if c == len(s.chunks) {
		s.chunks = append(s.chunks, make([]state, slabChunk))
	}
	st := &s.chunks[c][i]
	*st = state{slot: s.n}
	s.n++
	return st
}

// at is the i-th state handed out since the last reset, or nil.
func (s *stateSlab) at(i int) *state {
	if i >= s.n {
		return nil
	}
	return &s.chunks[i/slabChunk][i%slabChunk]
}

// clearRest clears the states the previous use handed out beyond this
// one's, so that they keep no instance alive.
func (s *stateSlab) clearRest() {
	for k := s.n; k < s.used; k++ {
		s.chunks[k/slabChunk][k%slabChunk] = state{}
	}
	s.used = s.n
}

// judge applies the probes' verdicts to the jobs' states and writes the
// marks that flip, then lifts the plan's marks.
func (c *Checker) judge(p roundPlan, guarded map[string]bool, now time.Time, res *RoundResult) {
	res.Verdicts = make(map[registry.InstanceKey]bool, len(p.jobs))
	for i := range p.jobs {
		j := &p.jobs[i]
		st := j.st
		st.lastResult, st.lastAt, st.lastOK = j.result, now, j.ok
		held := guarded[j.key.App] && !registry.IsPersistent(j.inst)
		next, restart := st.streak.next(j.ok, held, c.cfg.FailuresBeforeDown, c.cfg.SuccessesBeforeUp)
		if restart {
			st.since = now
		}
		if next.down && !st.down {
			st.reason = j.result
		}
		st.streak = next
		res.Verdicts[j.key] = !st.down
		if st.down == (j.inst.Health != nil) {
			continue
		}
		var mark *registry.HealthMark
		if st.down {
			mark = &registry.HealthMark{Reason: st.reason, Since: st.since.UnixMilli(), By: c.opt.Self}
		}
		c.flip(j.key, mark, res)
	}
	for _, key := range p.lifts {
		c.flip(key, nil, res)
	}
}

// flip writes key's mark (nil lifts it) and counts it.
func (c *Checker) flip(key registry.InstanceKey, mark *registry.HealthMark, res *RoundResult) {
	if !c.write(key, mark) {
		res.Errors++
		return
	}
	if mark != nil {
		res.Marked++
		c.m.flips.WithLabelValues("down").Inc()
	} else {
		res.Lifted++
		c.m.flips.WithLabelValues("up").Inc()
	}
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
func (c *Checker) probeAll(ctx context.Context, jobs []job) {
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
			// One probe context for the worker's probes, its deadline
			// moved for each (probeCtx): no timer per probe.
			pc := &probeCtx{Context: ctx}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) || ctx.Err() != nil {
					return
				}
				j := &jobs[i]
				t0 := time.Now()
				pc.deadline = t0.Add(c.prober.timeout)
				j.ok, j.result = c.prober.probeBy(pc, j.st.target)
				c.m.latency.Observe(time.Since(t0).Seconds())
				c.m.probe(j.st.target.mode, j.ok)
			}
		}()
	}
	wg.Wait()
}

// ownership returns whether this node probes a key (the instance in is
// the key's in the round's snapshot), for this round.
func (c *Checker) ownership(res *RoundResult) func(registry.InstanceKey, *registry.Instance) bool {
	if c.opt.Members == nil {
		// The instances whose clients talk to this node, found by their
		// stored pointer (a pointer's hash, not two strings'); an instance
		// stored anew between ClientLive and the snapshot has another
		// pointer, and is found by its key (a map built only then).
		live := c.opt.Registry.ClientLive()
		ptrs := make(map[*registry.Instance]struct{}, len(live))
		for _, in := range live {
			ptrs[in] = struct{}{}
		}
		var keys map[registry.InstanceKey]bool
		return func(k registry.InstanceKey, in *registry.Instance) bool {
			if _, ok := ptrs[in]; ok {
				return true
			}
			if keys == nil {
				keys = make(map[registry.InstanceKey]bool, len(live))
				for _, in := range live {
					keys[registry.InstanceKey{App: in.App, ID: in.ID()}] = true
				}
			}
			return keys[k]
		}
	}
	members := c.opt.Members()
	res.Members = len(members)
	// The owner is the app's (Owner): computed once for a run of the
	// same app, as the snapshot lists an app's instances together.
	var lastApp string
	var lastOwned, known bool
	return func(k registry.InstanceKey, _ *registry.Instance) bool {
		if !known || k.App != lastApp {
			lastApp, lastOwned, known = k.App, Owner(members, k) == c.opt.Self, true
		}
		return lastOwned
	}
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
