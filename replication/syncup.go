package replication

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// ErrPeerStarting means the peer is itself still copying the registry
// (it answered the sync fetch with 503), so its registry is not one to copy.
var ErrPeerStarting = errors.New("replication: peer is still starting")

// DefaultMaxSyncBodyBytes is the default of
// HTTPTransportConfig.MaxSyncBodyBytes.
const DefaultMaxSyncBodyBytes = 2 << 30

// ErrSyncTooLarge means a peer's registry was larger than
// the transport's sync limit (HTTPTransportConfig.MaxSyncBodyBytes); the attempt fails and the
// next peer is tried.
var ErrSyncTooLarge = errors.New("replication: peer's registry larger than the sync limit")

// SyncConfig configures the start-up copy of the registry from a peer.
type SyncConfig struct {
	// Store is the local registry the copy is applied to. Required.
	Store Store
	// Transport fetches a peer's registry (Transport.FetchRegistry).
	// Required.
	Transport Transport
	// Candidates returns the peers that may be copied from, self excluded.
	// It is called at every attempt, so peers found meanwhile count.
	Candidates func() []Peer
	// PeersExpected says the node was configured to have peers (cluster.join
	// or static service URLs), so finding none yet is worth another round:
	// the join may still be under way. Without it, no candidates means the
	// node runs alone and syncUp ends at once.
	PeersExpected bool
	// Zone is this node's zone: peers of the same zone are tried first.
	Zone string
	// Attempts is how many rounds over the candidates are made before
	// giving up (eureka.server.registry-sync-retries, default 5); 0 skips
	// syncUp, as Spring's default does.
	Attempts int
	// RetryWait is the pause between rounds
	// (eureka.server.registry-sync-retry-wait-ms).
	RetryWait time.Duration
	// FetchTimeout bounds how long a fetch of a peer's registry may go
	// without progress: with HTTPTransport, without bytes arriving or an
	// application decoded; with a transport that does not report progress,
	// the whole fetch. A registry of 1M instances takes longer than that to
	// copy on a busy machine, and is not stuck. Default 30 s
	// (DefaultSyncConfig; 0 means that too).
	FetchTimeout time.Duration
	// After is the timer between rounds; nil means time.After. Tests pass
	// one that fires at once and records the wait.
	After  func(time.Duration) <-chan time.Time
	Logger zerolog.Logger
}

// SyncResult says what syncUp did.
type SyncResult struct {
	// Source is the peer the registry was copied from; "" if none.
	Source string
	// Instances is how many instances were copied.
	Instances int
	// Attempts is how many rounds were made.
	Attempts int
	// Reached is true when a peer answered (even with an empty registry).
	Reached bool
	// PeersKnown is true when some peer was known at an attempt. A node
	// that never saw one runs alone and opens with an empty registry.
	PeersKnown bool
	// AllStarting is true when every peer answered, two rounds running,
	// that it is starting itself or holds no registry it trusts (503): the
	// whole cluster restarted, and no node has the registry to give.
	AllStarting bool
}

// Syncer runs syncUp (ARCHITECTURE.md decision 8): a real fetch of a
// peer's full registry, all statuses, through the Transport, applied as
// registers from OriginSync. Peers already replicate to the node while it
// copies, and the copy was taken before some of those writes; the registry
// itself keeps them from being undone (Store.BeginSync): a cancel leaves a
// tombstone the copy respects, and a peer's status write is applied again
// after the copy. The check and the write are one step under the
// registry's lock, so a cancel racing the copy cannot bring an instance
// back.
type Syncer struct {
	cfg SyncConfig
	log zerolog.Logger
}

// MaxSyncAttempts is the most rounds SyncConfig.Attempts may ask for.
const MaxSyncAttempts = 1000

// DefaultSyncConfig returns the defaults: 5 rounds 2 s apart (Eureka waits
// 30 s, which makes a start-up slow), 30 s per fetch. Store, Transport and
// Candidates must still be set.
func DefaultSyncConfig() SyncConfig {
	return SyncConfig{
		Attempts:     5,                // eureka.server.registry-sync-retries
		RetryWait:    2 * time.Second,  // eureka.server.registry-sync-retry-wait-ms
		FetchTimeout: 30 * time.Second, // a 100k-instance registry over a slow link
		Zone:         "default",        // cluster.Config's: a single zone
	}
}

// Validate reports the first knob that makes no sense, with its value, as
// an error naming the field. The wiring (Store, Transport,
// Candidates) is NewSyncer's to check.
func (c SyncConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("replication: "+field+" "+format, args...)
	}
	if c.Attempts < 0 || c.Attempts > MaxSyncAttempts {
		return bad("Attempts", "must be from 0 to %d, got %d", MaxSyncAttempts, c.Attempts)
	}
	if c.RetryWait < 0 || (c.RetryWait == 0 && c.Attempts > 1) {
		return bad("RetryWait", "must be positive, got %s", c.RetryWait)
	}
	if c.FetchTimeout < 0 {
		return bad("FetchTimeout", "must not be negative, got %s", c.FetchTimeout)
	}
	return nil
}

// NewSyncer returns a syncer; nothing runs until Run. A zero FetchTimeout
// is DefaultSyncConfig's.
func NewSyncer(cfg SyncConfig) (*Syncer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == nil || cfg.Transport == nil {
		return nil, errors.New("replication: SyncConfig needs a Store and a Transport")
	}
	if cfg.Candidates == nil {
		return nil, errors.New("replication: SyncConfig needs Candidates")
	}
	if cfg.FetchTimeout == 0 {
		cfg.FetchTimeout = DefaultSyncConfig().FetchTimeout
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	return &Syncer{cfg: cfg, log: cfg.Logger.With().Str(logComponent, "syncup").Logger()}, nil
}

// Run copies the registry from the first candidate that answers, same zone
// first, making up to Attempts rounds with RetryWait between them. It
// returns when a copy is applied, when every round failed, at once when
// the node is alone, or when ctx ends.
func (s *Syncer) Run(ctx context.Context) SyncResult {
	if s.cfg.Attempts <= 0 {
		s.log.Info().Msg("syncUp skipped (eureka.server.registry-sync-retries = 0)")
		return SyncResult{}
	}
	return s.rounds(ctx, 1, s.cfg.Attempts)
}

// RunFirst is Run's first round alone, for a node that opens for traffic
// whatever syncUp finds (eureka.server.wait-time-in-ms-when-sync-empty 0):
// a peer that answers at once is copied before the node opens; when none
// does, the node opens and RunRest makes the other rounds meanwhile. With
// Attempts 0 it skips syncUp, as Run does.
func (s *Syncer) RunFirst(ctx context.Context) SyncResult {
	if s.cfg.Attempts <= 0 {
		return s.Run(ctx)
	}
	return s.rounds(ctx, 1, 1)
}

// More reports whether res, RunFirst's result, leaves rounds for RunRest:
// nothing was copied, the node does not run alone, and Attempts allows
// another round.
func (s *Syncer) More(res SyncResult) bool {
	return res.Source == "" && (res.PeersKnown || s.cfg.PeersExpected) && s.cfg.Attempts > 1
}

// RunRest makes the rounds after RunFirst's (the second to Attempts),
// beginning with RetryWait; its result counts every round made.
func (s *Syncer) RunRest(ctx context.Context) SyncResult {
	return s.rounds(ctx, 2, s.cfg.Attempts)
}

// rounds makes the rounds from first to last (of Attempts), RetryWait
// before each but the first of all.
func (s *Syncer) rounds(ctx context.Context, first, last int) SyncResult {
	var res SyncResult
	startingRounds := 0
	for attempt := first; attempt <= last; attempt++ {
		res.Attempts = attempt
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return res
			case <-s.cfg.After(s.cfg.RetryWait):
			}
		}
		peers := orderByZone(s.cfg.Candidates(), s.cfg.Zone)
		if len(peers) == 0 {
			if !s.cfg.PeersExpected {
				s.log.Info().Msg("no peers: nothing to sync, this node starts the registry")
				return res
			}
			s.log.Info().Int(logAttempt, attempt).Int(logOf, s.cfg.Attempts).Msg("syncUp: no peer known yet (the cluster join may still be under way)")
			continue
		}
		res.PeersKnown = true
		starting := 0
		for _, p := range peers {
			n, err := s.copyFrom(ctx, p)
			if errors.Is(err, ErrPeerStarting) {
				// Expected while nodes start together: not an error.
				starting++
				s.log.Info().Str(logPeer, p.Name).Int(logAttempt, attempt).Int(logOf, s.cfg.Attempts).
					Msg("syncUp: peer not ready yet (it is still starting itself, 503); retrying")
				continue
			}
			if err != nil {
				s.log.Warn().Err(err).Str(logPeer, p.Name).Int(logAttempt, attempt).Int(logOf, s.cfg.Attempts).Msg("syncUp: peer did not answer")
				continue
			}
			res.Reached, res.Source, res.Instances = true, p.Name, n
			s.log.Info().Str(logPeer, p.Name).Str(logZone, p.Zone).Int(logInstances, n).Int(logAttempt, attempt).
				Msg("syncUp: registry copied")
			return res
		}
		// Every peer is starting as well (the whole cluster is): none has a
		// registry to give. Give them one more round, then start empty
		// rather than wait for each other.
		if starting == len(peers) {
			startingRounds++
			if startingRounds >= 2 {
				res.Reached, res.AllStarting = true, true
				s.log.Info().Int(logPeers, len(peers)).Msg("syncUp: every peer is starting too; opening with an empty registry")
				return res
			}
		} else {
			startingRounds = 0
		}
	}
	switch {
	case last < s.cfg.Attempts:
		// RunFirst: the node opens; RunRest goes on.
	case !res.PeersKnown:
		s.log.Info().Int(logAttempts, res.Attempts).Msg("syncUp: no peer appeared, this node starts the registry")
	default:
		s.log.Warn().Int(logAttempts, res.Attempts).Msg("syncUp: no peer could be reached")
	}
	return res
}

func (s *Syncer) copyFrom(ctx context.Context, p Peer) (int, error) {
	st := s.cfg.Store
	st.BeginSync()
	defer st.EndSync()

	instances, err := s.fetch(ctx, p)
	if err != nil {
		return 0, err
	}
	vctx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	s.addVersions(vctx, p, instances)
	cancel()
	copied, refused := 0, 0
	defer func() {
		if refused > 1 {
			s.log.Warn().Int(logRefused, refused).Str(logPeer, p.Name).Msg("syncUp: instances refused")
		}
	}()
	for _, in := range instances {
		stored, err := st.Apply(registry.RegisterOp(in).From(registry.OriginSync))
		if err != nil {
			s.log.Warn().Err(err).Str(logApp, in.App).Str(logInstanceID, in.ID()).Msg("syncUp: instance refused")
			continue
		}
		if stored != nil { // nil: cancelled while the copy was in flight
			copied++
		}
	}
	return copied, nil
}

// addVersions gives the copied instances their write versions, which a
// peer's GET /apps (Eureka's wire) does not carry: it asks the peer for
// the anti-entropy entries of every app copied and takes an entry's
// version where the copy, with that version, has the entry's digest (the
// same content). A copy that changed in between, or a peer that does not
// serve anti-entropy (a Java Eureka server), leaves version 0: the copy
// loses to any versioned one, and anti-entropy brings the version later.
func (s *Syncer) addVersions(ctx context.Context, p Peer, instances []*registry.Instance) {
	byApp := map[string][]*registry.Instance{}
	for _, in := range instances {
		byApp[in.App] = append(byApp[in.App], in)
	}
	apps := make([]string, 0, len(byApp))
	for app := range byApp {
		apps = append(apps, app)
	}
	sort.Strings(apps)
	matched := 0
	for len(apps) > 0 {
		// Requests of at most wire.MaxDigestApps apps and about
		// defaultMaxEntries entries, so a large registry's answer stays
		// well under the transport's bound.
		n, entries := 0, 0
		for n < len(apps) && n < wire.MaxDigestApps && (n == 0 || entries+len(byApp[apps[n]]) <= defaultMaxEntries) {
			entries += len(byApp[apps[n]])
			n++
		}
		chunk := apps[:n]
		apps = apps[n:]
		reply, err := s.cfg.Transport.Digest(ctx, p, wire.DigestRequest{Apps: chunk})
		if err != nil {
			s.log.Info().Err(err).Str(logPeer, p.Name).Msg("syncUp: copied without write versions; anti-entropy adds them later")
			return
		}
		for _, app := range chunk {
			entries := map[string]wire.DigestEntry{}
			for _, e := range reply.Entries[app] {
				if !e.Tombstone {
					entries[e.ID] = e
				}
			}
			for _, in := range byApp[app] {
				e, ok := entries[in.ID()]
				if !ok {
					continue
				}
				in.WriteVersion = e.Version
				if registry.InstanceDigest(in) != e.Digest {
					in.WriteVersion = 0
					continue
				}
				matched++
			}
		}
	}
	if matched < len(instances) {
		s.log.Info().Int(logVersioned, matched).Int(logInstances, len(instances)).Str(logPeer, p.Name).
			Msg("syncUp: some copies changed on the peer meanwhile and came without write versions")
	}
}

// orderByZone puts peers of zone first, each group by name.
func orderByZone(peers []Peer, zone string) []Peer {
	out := append([]Peer(nil), peers...)
	sort.SliceStable(out, func(i, j int) bool {
		si, sj := out[i].Zone == zone, out[j].Zone == zone
		if si != sj {
			return si
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// progressFetcher is a Transport whose fetch reports progress, so a slow
// but moving copy is not cut off (HTTPTransport).
type progressFetcher interface {
	FetchRegistryProgress(ctx context.Context, p Peer, progress func()) ([]*registry.Instance, error)
}

// fetch runs the transport's FetchRegistry under FetchTimeout: as an
// idle timeout when the transport reports progress, else as a deadline.
func (s *Syncer) fetch(ctx context.Context, p Peer) ([]*registry.Instance, error) {
	pf, ok := s.cfg.Transport.(progressFetcher)
	if !ok {
		fetchCtx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
		defer cancel()
		return s.cfg.Transport.FetchRegistry(fetchCtx, p)
	}
	fetchCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(max(s.cfg.FetchTimeout/8, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if now.Sub(time.Unix(0, last.Load())) > s.cfg.FetchTimeout {
					cancel(fmt.Errorf("no progress for %s", s.cfg.FetchTimeout))
					return
				}
			}
		}
	}()
	in, err := pf.FetchRegistryProgress(fetchCtx, p, func() { last.Store(time.Now().UnixNano()) })
	if err != nil && context.Cause(fetchCtx) != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(fetchCtx))
	}
	return in, err
}
