package replication

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// maxAppSize bounds the app sizes a peer reports (above any registry's
// limit).
const maxAppSize = 1 << 20

// defaultMaxEntries is AntiEntropyConfig.MaxEntries's default: about
// 8 MB of entries per answer.
const defaultMaxEntries = 100_000

// DefaultAntiEntropyInterval is muster.anti-entropy-interval-ms's default.
const DefaultAntiEntropyInterval = 10 * time.Second

// AntiEntropyStore is the local registry as anti-entropy uses it:
// *registry.Registry implements it.
type AntiEntropyStore interface {
	DigestSource
	Apply(registry.Op) (*registry.Instance, error)
}

// AntiEntropyConfig configures anti-entropy.
type AntiEntropyConfig struct {
	// Store is the local registry. Required.
	Store AntiEntropyStore
	// Transport asks peers for digests and copies. Required.
	Transport Transport
	// Peers returns the peers to reconcile with (the replicator's peers).
	// Required. A peer that answers ErrNoAntiEntropy (a Java Eureka server)
	// is left alone for unsupportedBackoff rounds.
	Peers func() []Peer
	// Interval is the time between rounds, jittered by ±20 % so that nodes
	// do not ask each other in lockstep. 0 disables Run (rounds can still
	// be driven by hand). muster.anti-entropy-interval-ms, default 10 s.
	Interval time.Duration
	// RequestTimeout bounds each request of a round. Default 5 s, as
	// batches (eureka.server.peer-node-read-timeout-ms); 0 means that too.
	RequestTimeout time.Duration
	// MaxEntries is about how many entries one answer of a large app's
	// buckets may hold (about 80 bytes each); more are asked for in
	// several requests. Default 100,000.
	MaxEntries int
	// Now is the clock; nil means time.Now. Rand jitters the interval; nil
	// means a random seed.
	Now    func() time.Time
	Rand   *rand.Rand
	Logger zerolog.Logger
	// OnMuster, if set, is called with the name of a peer whose round ran
	// through: it serves anti-entropy, so it is a Muster node
	// (Replicator.MarkMuster).
	OnMuster func(peer string)
}

// DefaultAntiEntropyConfig returns the defaults: a round every 10 s, 5 s
// per request. Store, Transport and Peers must still be set.
func DefaultAntiEntropyConfig() AntiEntropyConfig {
	return AntiEntropyConfig{
		Interval:       DefaultAntiEntropyInterval,
		RequestTimeout: 5 * time.Second, // peer-node-read-timeout-ms, as batches
	}
}

// Validate reports the first knob that makes no sense, with its value, as
// an error naming the field. The wiring (Store, Transport, Peers) is
// NewAntiEntropy's to check.
func (c AntiEntropyConfig) Validate() error {
	if c.Interval < 0 {
		return fmt.Errorf("replication: Interval must not be negative (0 turns anti-entropy off), got %s", c.Interval)
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("replication: RequestTimeout must not be negative, got %s", c.RequestTimeout)
	}
	return nil
}

// Repair kinds, as counted in metrics (muster_anti_entropy_repairs_total).
const (
	RepairMissing   = "missing"   // an instance adopted from a peer
	RepairStale     = "stale"     // a copy replaced by a peer's newer one
	RepairCancelled = "cancelled" // an instance removed by a peer's newer tombstone
)

// Repairs counts repairs by kind.
type Repairs struct {
	Missing, Stale, Cancelled uint64
}

// Total is the sum of every kind.
func (r Repairs) Total() uint64 { return r.Missing + r.Stale + r.Cancelled }

func (r *Repairs) add(o Repairs) {
	r.Missing += o.Missing
	r.Stale += o.Stale
	r.Cancelled += o.Cancelled
}

// RoundResult is what one round with one peer found and did.
type RoundResult struct {
	Peer string
	// InSync is true when the round found nothing different.
	InSync bool
	// Divergent is how many instances differed (on either side, including
	// those the peer will repair from this node on its own round).
	Divergent int
	// Repaired counts what this node changed; Changed names the first
	// maxRepairsNamed of those instances (for the log line).
	Repaired Repairs
	Changed  []RepairedInstance
	// Requests is how many requests the round made (1 when in sync).
	Requests int
	// Err is why the round stopped early; nil when it ran through.
	Err error
}

// RepairedInstance is one instance a round changed, and how (RepairMissing,
// RepairStale or RepairCancelled).
type RepairedInstance struct {
	Key  registry.InstanceKey
	Kind string
}

func (r RepairedInstance) String() string { return r.Key.App + "/" + r.Key.ID + " (" + r.Kind + ")" }

// maxRepairsNamed caps the instances a repair log line names: a round after
// a long partition may repair thousands.
const maxRepairsNamed = 10

func (r *RoundResult) repaired(kind string, key registry.InstanceKey) {
	switch kind {
	case RepairMissing:
		r.Repaired.Missing++
	case RepairStale:
		r.Repaired.Stale++
	case RepairCancelled:
		r.Repaired.Cancelled++
	}
	if len(r.Changed) < maxRepairsNamed {
		r.Changed = append(r.Changed, RepairedInstance{Key: key, Kind: kind})
	}
}

// Anti-entropy states of a peer (AntiEntropyStats.State), as /admin/status
// shows them.
const (
	AEPending     = "pending"     // no round has ended yet
	AEInSync      = "in-sync"     // the last round ran through and found nothing different
	AEDivergent   = "divergent"   // the last round ran through and found differences
	AEFailing     = "failing"     // the last round failed: whether the peer agrees is unknown
	AEUnsupported = "unsupported" // the peer does not serve anti-entropy (a Java Eureka server)
)

// AntiEntropyStats is one peer's anti-entropy state, for /admin/status and
// metrics.
type AntiEntropyStats struct {
	Peer string
	// InSync: the last round ran through and found nothing different. A
	// failed round clears it: unknown is not in sync, so a partitioned or
	// refusing peer never keeps showing the verdict of its last good round.
	InSync bool
	// Last is when the last round that ran through ended; zero if never.
	Last time.Time
	// Divergent is the last completed round's count.
	Divergent int
	// Repairs counts this node's repairs from this peer since start.
	Repairs Repairs
	// Unsupported: the peer does not serve anti-entropy (a Java Eureka
	// server).
	Unsupported bool
	// Failing: the last round failed.
	Failing bool
	// LastError is the last failed round's error ("" if none yet) and
	// LastErrorAt when it happened; kept after later good rounds (compare
	// with Last), as replication's PeerStats.LastError is.
	LastError   string
	LastErrorAt time.Time
	// RoundsOK and RoundsFailed count the rounds with this peer since start
	// (an unsupported peer's are neither).
	RoundsOK, RoundsFailed uint64
}

// State is the peer's anti-entropy state in one word (AEInSync...).
func (s AntiEntropyStats) State() string {
	switch {
	case s.Unsupported:
		return AEUnsupported
	case s.Failing:
		return AEFailing
	case s.Last.IsZero():
		return AEPending
	case s.InSync:
		return AEInSync
	}
	return AEDivergent
}

// failureLogEvery rate-limits the warnings of a peer whose rounds keep
// failing: the first failure is logged, then one line at most this often
// with the count of those not logged.
const failureLogEvery = time.Minute

// unsupportedBackoff is how many rounds a peer that does not serve
// anti-entropy is skipped before it is asked again (it may have been
// upgraded).
const unsupportedBackoff = 30

type aePeer struct {
	stats AntiEntropyStats
	skip  int // rounds left to skip (unsupported)
	// failed counts the rounds failed in a row; warnedAt is when the last
	// warning about them was logged, quiet how many failed since unlogged.
	failed   int
	warnedAt time.Time
	quiet    int
	// startingLogged: a failure of a peer that never answered a round
	// and looks like it is starting (PeerStarting) was logged, once.
	startingLogged bool
}

// AntiEntropy reconciles this node's registry with its peers'. Each round
// is pull-only: the node compares digests with one peer, narrowing from
// the root to apps to instances, fetches the copies it lacks or holds
// older versions of, and applies them (and the peer's newer tombstones)
// from registry.OriginAntiEntropy under the one winner rule. It never
// removes an instance for being absent at the peer; every pair of nodes is
// covered because both run rounds. See the package documentation.
type AntiEntropy struct {
	cfg AntiEntropyConfig
	now func() time.Time
	log zerolog.Logger

	poke chan struct{}

	// roundMu serialises rounds (Run and hand-driven ones) and guards known.
	roundMu sync.Mutex
	known   map[string]bool // peers seen at the last look (roundMu)

	// mu guards peers, synced, totals and rand.
	mu    sync.Mutex
	peers map[string]*aePeer
	// synced is, for every peer seen (those that left too, until
	// departedHold), when the last round that found it in sync started;
	// zero if none did yet. TombstoneHold reads it.
	synced map[string]time.Time
	totals Repairs
	rand   *rand.Rand
}

// departedHold is how long a peer that left still holds back the pruning
// of tombstones (TombstoneHold): registry.Config.TombstoneMaxAge's
// default, beyond which the registry prunes them anyway.
const departedHold = 24 * time.Hour

// NewAntiEntropy returns an anti-entropy runner; nothing runs until Run or
// a round is driven by hand.
func NewAntiEntropy(cfg AntiEntropyConfig) (*AntiEntropy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == nil || cfg.Transport == nil || cfg.Peers == nil {
		return nil, errors.New("replication: AntiEntropyConfig needs a Store, a Transport and Peers")
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultAntiEntropyConfig().RequestTimeout
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = defaultMaxEntries
	}
	a := &AntiEntropy{
		cfg: cfg, now: cfg.Now, rand: cfg.Rand,
		log:    cfg.Logger.With().Str(logComponent, "anti-entropy").Logger(),
		poke:   make(chan struct{}, 1),
		known:  map[string]bool{},
		peers:  map[string]*aePeer{},
		synced: map[string]time.Time{},
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.rand == nil {
		a.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return a, nil
}

// Run does a round with every peer every Interval (±20 %), and at once
// with a peer that joined or came back (PeersChanged), until ctx ends. It
// returns at once when Interval is 0.
func (a *AntiEntropy) Run(ctx context.Context) {
	if a.cfg.Interval <= 0 {
		return
	}
	t := time.NewTimer(a.jittered())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.poke:
			a.RoundNewPeers(ctx)
		case <-t.C:
			a.RoundAll(ctx)
			t.Reset(a.jittered())
		}
	}
}

func (a *AntiEntropy) jittered() time.Duration {
	a.mu.Lock()
	f := 0.8 + 0.4*a.rand.Float64()
	a.mu.Unlock()
	return time.Duration(float64(a.cfg.Interval) * f)
}

// PeersChanged tells Run that the peer list changed: a peer that joined or
// came back (memberlist alive after dead, a partition healed and the
// member re-added) gets a round at once, so what was made while it was
// away reaches it, and what it made reaches this node, without waiting
// for the next interval. It never blocks.
func (a *AntiEntropy) PeersChanged() {
	select {
	case a.poke <- struct{}{}:
	default:
	}
}

// RoundAll runs one round with every peer, in name order.
func (a *AntiEntropy) RoundAll(ctx context.Context) []RoundResult {
	a.roundMu.Lock()
	defer a.roundMu.Unlock()
	peers := a.lookLocked()
	out := make([]RoundResult, 0, len(peers))
	for _, p := range peers {
		out = append(out, a.roundLocked(ctx, p))
	}
	return out
}

// RoundNewPeers runs a round with each peer that was not in the list at
// the previous look (RoundAll or RoundNewPeers).
func (a *AntiEntropy) RoundNewPeers(ctx context.Context) []RoundResult {
	a.roundMu.Lock()
	defer a.roundMu.Unlock()
	before := copySet(a.known)
	var out []RoundResult
	for _, p := range a.lookLocked() {
		if !before[p.Name] {
			out = append(out, a.roundLocked(ctx, p))
		}
	}
	return out
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// lookLocked returns the peers sorted by name and remembers them; a peer
// that left is forgotten, so it counts as new when it comes back.
func (a *AntiEntropy) lookLocked() []Peer {
	peers := slices.Clone(a.cfg.Peers())
	slices.SortFunc(peers, func(x, y Peer) int { return strings.Compare(x.Name, y.Name) })
	clear(a.known)
	for _, p := range peers {
		a.known[p.Name] = true
	}
	a.mu.Lock()
	for name := range a.peers {
		if !a.known[name] {
			delete(a.peers, name)
		}
	}
	now := a.now()
	for _, p := range peers {
		if st := a.peers[p.Name]; st != nil && st.stats.Unsupported {
			continue
		}
		if _, ok := a.synced[p.Name]; !ok {
			a.synced[p.Name] = time.Time{}
		}
	}
	for name, at := range a.synced {
		if !a.known[name] && now.Sub(at) > departedHold {
			delete(a.synced, name)
		}
	}
	a.mu.Unlock()
	return peers
}

// TombstoneHold is the time since which every peer this node knows of
// (and every one that left within a day) has been seen in sync: a
// tombstone made after it may still be needed to keep a cancelled
// instance from coming back from a peer that holds a stale copy, so the
// registry keeps it (registry.Registry.SetTombstoneHold). A peer that was
// never in sync holds back every tombstone; a Java Eureka peer (which
// serves no anti-entropy and takes no tombstones) holds back none.
func (a *AntiEntropy) TombstoneHold() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	hold := a.now().Add(time.Hour) // no peers: nothing to wait for
	for _, at := range a.synced {
		if at.Before(hold) {
			hold = at
		}
	}
	return hold
}

// Round runs one round with p.
func (a *AntiEntropy) Round(ctx context.Context, p Peer) RoundResult {
	a.roundMu.Lock()
	defer a.roundMu.Unlock()
	return a.roundLocked(ctx, p)
}

func (a *AntiEntropy) roundLocked(ctx context.Context, p Peer) RoundResult {
	a.mu.Lock()
	st := a.peers[p.Name]
	if st == nil {
		st = &aePeer{stats: AntiEntropyStats{Peer: p.Name}}
		a.peers[p.Name] = st
	}
	if st.skip > 0 {
		st.skip--
		a.mu.Unlock()
		return RoundResult{Peer: p.Name, Err: ErrNoAntiEntropy}
	}
	if _, ok := a.synced[p.Name]; !ok {
		a.synced[p.Name] = time.Time{}
	}
	a.mu.Unlock()

	start := a.now()
	res := a.round(ctx, p)
	if res.Err == nil && res.InSync {
		a.mu.Lock()
		a.synced[p.Name] = start
		a.mu.Unlock()
	}
	if a.record(p, st, res) && a.cfg.OnMuster != nil {
		a.cfg.OnMuster(p.Name)
	}
	return res
}

// record keeps a round's outcome for Stats and logs it. It reports whether
// the peer served anti-entropy for the first time (or again).
func (a *AntiEntropy) record(p Peer, st *aePeer, res RoundResult) (firstServed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st.stats.Repairs.add(res.Repaired)
	a.totals.add(res.Repaired)
	now := a.now()
	switch {
	case errors.Is(res.Err, ErrNoAntiEntropy):
		if !st.stats.Unsupported {
			a.log.Info().Str(logPeer, p.Name).Msg("peer does not serve anti-entropy (a Eureka server?): left to Eureka's own repair")
		}
		st.stats.Unsupported, st.skip = true, unsupportedBackoff
		st.stats.InSync = false
		delete(a.synced, p.Name)
	case res.Err != nil:
		// Unknown is not in sync: a partitioned peer must not keep showing
		// the verdict of its last good round.
		st.stats.InSync, st.stats.Failing = false, true
		st.stats.LastError, st.stats.LastErrorAt = res.Err.Error(), now
		st.stats.RoundsFailed++
		a.logFailure(p, st, res.Err, now)
	default:
		firstServed = st.stats.Last.IsZero() || st.stats.Unsupported
		if st.failed > 0 {
			a.log.Info().Str(logPeer, p.Name).Int(logFailedRounds, st.failed).Msg("anti-entropy rounds with the peer run through again")
		}
		st.failed, st.quiet = 0, 0
		st.stats.Unsupported, st.stats.Failing = false, false
		st.stats.InSync, st.stats.Divergent, st.stats.Last = res.InSync, res.Divergent, now
		st.stats.RoundsOK++
	}
	if n := res.Repaired.Total(); n > 0 {
		names := make([]string, len(res.Changed))
		for i, c := range res.Changed {
			names[i] = c.String()
		}
		ev := a.log.Info().Str(logPeer, p.Name).Uint64(RepairMissing, res.Repaired.Missing).
			Uint64(RepairStale, res.Repaired.Stale).Uint64(RepairCancelled, res.Repaired.Cancelled).
			Int(logDivergent, res.Divergent).Strs(logInstances, names)
		if more := n - uint64(len(names)); more > 0 {
			ev = ev.Uint64(logMore, more)
		}
		ev.Msg("anti-entropy repaired the registry")
	} else if res.Err == nil {
		a.log.Debug().Str(logPeer, p.Name).Bool(logInSync, res.InSync).Int(logDivergent, res.Divergent).Msg("anti-entropy round")
	}
	return firstServed
}

// logFailure warns about a failed round: the first of a run of failures,
// then at most once per failureLogEvery with how many went unlogged, so a
// lasting refusal (peer secret, TLS, 403) shows at the default level without
// a line per round. Errors never carry credentials: peer names are redacted
// URLs and net/http strips passwords from its errors.
func (a *AntiEntropy) logFailure(p Peer, st *aePeer, err error, now time.Time) {
	st.failed++
	if st.stats.RoundsOK == 0 && PeerStarting(err) {
		// A peer still starting: said once, at info level.
		if !st.startingLogged {
			st.startingLogged = true
			a.log.Info().Err(err).Str(logPeer, p.Name).Msg("anti-entropy: peer not answering yet (still starting?); rounds retry")
		} else {
			a.log.Debug().Err(err).Str(logPeer, p.Name).Msg("anti-entropy round failed: peer still starting")
		}
		return
	}
	if st.failed > 1 && now.Sub(st.warnedAt) < failureLogEvery {
		st.quiet++
		a.log.Debug().Err(err).Str(logPeer, p.Name).Msg("anti-entropy round failed")
		return
	}
	ev := a.log.Warn().Err(err).Str(logPeer, p.Name).Int(logFailedRounds, st.failed)
	if st.quiet > 0 {
		ev = ev.Int(logSuppressed, st.quiet)
	}
	ev.Msg("anti-entropy round failed")
	st.warnedAt, st.quiet = now, 0
}

// round is one pull round with p: root, then app digests, then the
// entries of the differing apps, then the copies to adopt.
func (a *AntiEntropy) round(ctx context.Context, p Peer) (res RoundResult) {
	res.Peer = p.Name
	src := a.cfg.Store
	root := src.RootDigest()
	reply, err := a.digest(ctx, p, wire.DigestRequest{Root: root}, &res)
	if err != nil {
		res.Err = err
		return res
	}
	if reply.Root == root {
		res.InSync = true
		return res
	}
	mine := src.AppDigests(nil)
	var differ []string
	for app, d := range reply.AppDigests {
		if mine[app] != d {
			differ = append(differ, app)
		}
	}
	for app := range mine {
		if _, ok := reply.AppDigests[app]; !ok {
			differ = append(differ, app)
		}
	}
	slices.Sort(differ)

	// Large apps (on either side) are compared bucket by bucket first.
	sizes := src.AppSizes(BucketThreshold, nil)
	for app, n := range reply.Sizes {
		// The peer's count only steers how finely the app is compared;
		// an absurd one must not split it into thousands of requests.
		sizes[app] = max(sizes[app], min(n, maxAppSize))
	}
	var whole, big []string
	for _, app := range differ {
		if sizes[app] > BucketThreshold {
			big = append(big, app)
		} else {
			whole = append(whole, app)
		}
	}

	cmp := appComparison{src: src, res: &res, missing: map[registry.InstanceKey]bool{}, digests: map[registry.InstanceKey]uint64{}}
	var local []registry.DigestEntry
	for chunk := range slices.Chunk(whole, wire.MaxDigestApps) {
		reply, err := a.digest(ctx, p, wire.DigestRequest{Root: root, Apps: chunk}, &res)
		if err != nil {
			res.Err = err
			return res
		}
		for _, app := range chunk {
			local = src.AppEntries(app, local[:0])
			cmp.app(app, reply.Entries[app], local, nil)
		}
	}
	for chunk := range slices.Chunk(big, wire.MaxDigestApps) {
		if err := a.compareBuckets(ctx, p, root, chunk, sizes, &cmp); err != nil {
			res.Err = err
			return res
		}
	}
	fetch, missing, before := cmp.fetch, cmp.missing, cmp.digests

	pending := slices.Collect(slices.Chunk(fetch, wire.MaxCopyKeys))
	for len(pending) > 0 {
		chunk := pending[0]
		pending = pending[1:]
		cctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
		copies, err := a.cfg.Transport.Copies(cctx, p, chunk)
		cancel()
		res.Requests++
		if errors.Is(err, ErrAnswerTooLarge) && len(chunk) > 1 {
			// Instances with large metadata: ask for half as many at once.
			pending = append([][]registry.InstanceKey{chunk[:len(chunk)/2], chunk[len(chunk)/2:]}, pending...)
			continue
		}
		if err != nil {
			res.Err = err
			return res
		}
		for _, c := range copies {
			in := c.Instance
			key := registry.InstanceKey{App: in.App, ID: in.ID()}
			if missing[key] && !c.Live {
				continue // expired there meanwhile: not to be resurrected
			}
			op := registry.RegisterOp(in).From(registry.OriginAntiEntropy)
			op.RenewedAt = c.LastRenewal
			stored, err := src.Apply(op)
			if err != nil {
				a.log.Warn().Err(err).Str(logPeer, p.Name).Str(logApp, key.App).Str(logInstanceID, key.ID).Msg("anti-entropy copy refused")
				continue
			}
			if stored == nil || !missing[key] && registry.InstanceDigest(stored) == before[key] {
				continue // nothing newer in it, or a tombstone here
			}
			if missing[key] {
				res.repaired(RepairMissing, key)
			} else {
				res.repaired(RepairStale, key)
			}
		}
	}
	res.InSync = res.Divergent == 0
	return res
}

// appComparison is what comparing apps' entries with a peer's found: the
// copies to fetch (those this node lacks are also in missing), counted
// in res as they are found.
type appComparison struct {
	src     AntiEntropyStore
	res     *RoundResult
	fetch   []registry.InstanceKey
	missing map[registry.InstanceKey]bool
	// digests are the local digests of the copies fetched to merge.
	digests map[registry.InstanceKey]uint64
}

// app compares the peer's entries of app with this node's (local) and
// applies the peer's newer tombstones at once. With mask set, only the
// entries of those buckets are compared: a peer that did not narrow its
// answer to them sends them all, and the rest is not looked at.
func (c *appComparison) app(app string, peer []wire.DigestEntry, local []registry.DigestEntry, mask []bool) {
	res := c.res
	byID := make(map[string]registry.DigestEntry, len(local))
	for _, e := range local {
		byID[e.ID] = e
	}
	for _, e := range peer {
		if mask != nil && !mask[registry.BucketOf(e.ID, len(mask))] {
			continue
		}
		key := registry.InstanceKey{App: app, ID: e.ID}
		loc, has := byID[e.ID]
		delete(byID, e.ID)
		switch {
		case e.Tombstone:
			if has && loc.Tombstone {
				continue
			}
			if has && e.Version < loc.Version {
				res.Divergent++ // written again after that cancel: the peer will take ours
				continue
			}
			// A newer cancel: remove ours; or one we never heard of:
			// keep its tombstone, so no stale copy brings it back.
			op := registry.CancelOp(app, e.ID).From(registry.OriginAntiEntropy)
			op.Version = e.Version
			op.TombstoneTTL = time.Duration(min(max(e.TTL, 0), 1<<40)) * time.Millisecond
			removed, err := c.src.Apply(op)
			if has {
				res.Divergent++
				if err == nil && removed != nil {
					res.repaired(RepairCancelled, key)
				}
			}
		case !has || loc.Tombstone:
			res.Divergent++
			if e.Live && (!has || e.Version > loc.Version) {
				c.fetch = append(c.fetch, key)
				c.missing[key] = true
			}
		case loc.Digest != e.Digest:
			// Copies are merged piece by piece (registry's mergeCopies):
			// each side may hold a newer piece, so both take the other's
			// copy, and both end with the same merge.
			res.Divergent++
			c.fetch = append(c.fetch, key)
			c.digests[key] = loc.Digest
		}
	}
	for _, loc := range byID {
		if !loc.Tombstone {
			res.Divergent++ // the peer lacks it: it adopts ours on its round if ours is live
		}
	}
}

// compareBuckets compares large apps bucket by bucket: the peer's bucket
// digests, then the entries of the differing buckets only. A peer that
// answers no bucket digests for an app gets the app compared whole.
func (a *AntiEntropy) compareBuckets(ctx context.Context, p Peer, root uint64, apps []string, sizes map[string]int, cmp *appComparison) error {
	buckets := make(map[string]int, len(apps))
	for _, app := range apps {
		buckets[app] = bucketsFor(sizes[app])
	}
	reply, err := a.digest(ctx, p, wire.DigestRequest{Root: root, Buckets: buckets}, cmp.res)
	if err != nil {
		return err
	}
	// What to ask for: each app's differing buckets (or the whole app),
	// split so that no answer holds more than about MaxEntries entries.
	type piece struct {
		app  string
		set  *wire.BucketSet // nil: the whole app
		size int             // entries expected
	}
	var pieces []piece
	var mine []uint64
	for _, app := range apps {
		n := buckets[app]
		theirs := reply.BucketDigests[app]
		if len(theirs) != n {
			pieces = append(pieces, piece{app: app, size: sizes[app]}) // not narrowed
			continue
		}
		mine = a.cfg.Store.AppBuckets(app, n, mine)
		var differ []int
		for b := range n {
			if mine[b] != theirs[b] {
				differ = append(differ, b)
			}
		}
		perBucket := max(sizes[app]/n, 1)
		for chunk := range slices.Chunk(differ, max(a.cfg.MaxEntries/perBucket, 1)) {
			pieces = append(pieces, piece{app: app, set: &wire.BucketSet{N: n, Buckets: chunk}, size: len(chunk) * perBucket})
		}
	}
	var local []registry.DigestEntry
	for len(pieces) > 0 {
		req := wire.DigestRequest{Root: root, Only: map[string]wire.BucketSet{}}
		masks := map[string][]bool{}
		entries := 0
		for len(pieces) > 0 && len(req.Apps) < wire.MaxDigestApps {
			pc := pieces[0]
			if _, dup := masks[pc.app]; dup || len(req.Apps) > 0 && entries+pc.size > a.cfg.MaxEntries {
				break
			}
			pieces = pieces[1:]
			req.Apps = append(req.Apps, pc.app)
			masks[pc.app] = nil
			if pc.set != nil {
				req.Only[pc.app] = *pc.set
				masks[pc.app] = pc.set.Mask()
			}
			entries += pc.size
		}
		reply, err := a.digest(ctx, p, req, cmp.res)
		if err != nil {
			return err
		}
		for _, app := range req.Apps {
			if m := masks[app]; m != nil {
				local = a.cfg.Store.AppBucketEntries(app, m, local[:0])
			} else {
				local = a.cfg.Store.AppEntries(app, local[:0])
			}
			cmp.app(app, reply.Entries[app], local, masks[app])
		}
	}
	return nil
}

func (a *AntiEntropy) digest(ctx context.Context, p Peer, req wire.DigestRequest, res *RoundResult) (wire.DigestReply, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	res.Requests++
	return a.cfg.Transport.Digest(ctx, p, req)
}

// Stats returns each current peer's anti-entropy state, sorted by name.
func (a *AntiEntropy) Stats() []AntiEntropyStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]AntiEntropyStats, 0, len(a.peers))
	for _, st := range a.peers {
		out = append(out, st.stats)
	}
	slices.SortFunc(out, func(x, y AntiEntropyStats) int { return strings.Compare(x.Peer, y.Peer) })
	return out
}

// Totals returns the repairs made since start, from every peer.
func (a *AntiEntropy) Totals() Repairs {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.totals
}
