package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// ErrPeerStarting means the peer is itself still copying the registry
// (it answered the sync fetch with 503), so its registry is not one to copy.
var ErrPeerStarting = errors.New("replication: peer is still starting")

// DefaultMaxSyncBodyBytes is SyncConfig.MaxBodyBytes' default.
const DefaultMaxSyncBodyBytes = 2 << 30

// ErrSyncTooLarge means a peer's registry was larger than
// SyncConfig.MaxBodyBytes; the attempt fails and the next peer is tried.
var ErrSyncTooLarge = errors.New("replication: peer's registry larger than the sync limit")

// SyncConfig configures the start-up copy of the registry from a peer.
type SyncConfig struct {
	Registry *registry.Registry
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
	// FetchTimeout bounds one fetch of a peer's registry. Default 30 s.
	FetchTimeout time.Duration
	// MaxBodyBytes caps the registry read from a peer (after gzip is
	// undone); a larger one fails the attempt. muster.max-sync-body-bytes,
	// default 2 GiB: a million instances of ~1.2 KB as JSON.
	MaxBodyBytes int64
	// Fetch copies a peer's registry; nil means GET {peer}apps over HTTP.
	Fetch func(ctx context.Context, p Peer) ([]*registry.Instance, error)
	// Sign signs that HTTP fetch (cluster.peer-secret); nil sends it unsigned.
	Sign RequestSigner
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
}

// Syncer runs syncUp (ARCHITECTURE.md decision 8): a real fetch of a
// peer's full registry, all statuses, applied as replicated registrations.
// Peers already replicate to the node while it syncs, and the copy was
// taken before some of those writes: a cancel must not be undone by it, and
// a status change that found nothing to change (the instance was not copied
// yet) must be applied after it. Observe (the registry's change hook) and
// ObserveReplicated (the batch receiver) collect them while a copy is in
// flight.
type Syncer struct {
	cfg SyncConfig
	log zerolog.Logger

	active atomic.Bool
	// mu guards cancelled and replays.
	mu        sync.Mutex
	cancelled map[registry.InstanceKey]struct{}
	replays   []statusReplay
}

// statusReplay is a replicated status change seen during a copy.
type statusReplay struct {
	action registry.Action // StatusUpdate or DeleteStatusOverride
	key    registry.InstanceKey
	status registry.Status
	dirty  int64
}

// NewSyncer returns a syncer; nothing runs until Run.
func NewSyncer(cfg SyncConfig) *Syncer {
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 30 * time.Second
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxSyncBodyBytes
	}
	s := &Syncer{cfg: cfg, log: cfg.Logger.With().Str("component", "syncup").Logger()}
	if s.cfg.Fetch == nil {
		client := &http.Client{Timeout: cfg.FetchTimeout, CheckRedirect: noRedirects}
		s.cfg.Fetch = func(ctx context.Context, p Peer) ([]*registry.Instance, error) {
			return fetchRegistry(ctx, client, p, cfg.Sign, cfg.MaxBodyBytes)
		}
	}
	return s
}

// Observe notes a cancel that arrives while syncing. It is cheap otherwise,
// as the change hook runs for every heartbeat.
func (s *Syncer) Observe(ch registry.Change) {
	if !s.active.Load() || ch.Action != registry.ActionCancel {
		return
	}
	s.mu.Lock()
	if s.cancelled != nil {
		s.cancelled[ch.Key] = struct{}{}
	}
	s.mu.Unlock()
}

// ObserveReplicated notes a cancel or status change a peer replicated while
// a copy is in flight, whether or not it found the instance.
func (s *Syncer) ObserveReplicated(action registry.Action, key registry.InstanceKey, status registry.Status, dirty int64) {
	if !s.active.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelled == nil {
		return
	}
	switch action {
	case registry.ActionCancel:
		s.cancelled[key] = struct{}{}
	case registry.ActionStatusUpdate, registry.ActionDeleteStatusOverride:
		s.replays = append(s.replays, statusReplay{action, key, status, dirty})
	}
}

// Run copies the registry from the first candidate that answers, same zone
// first, making up to Attempts rounds with RetryWait between them. It
// returns when a copy is applied, when every round failed, at once when
// the node is alone, or when ctx ends.
func (s *Syncer) Run(ctx context.Context) SyncResult {
	var res SyncResult
	if s.cfg.Attempts <= 0 {
		s.log.Info().Msg("syncUp skipped (eureka.server.registry-sync-retries = 0)")
		return res
	}
	startingRounds := 0
	for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
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
			s.log.Warn().Int("attempt", attempt).Int("of", s.cfg.Attempts).Msg("syncUp: no peer known yet")
			continue
		}
		res.PeersKnown = true
		starting := 0
		for _, p := range peers {
			n, err := s.copyFrom(ctx, p)
			if errors.Is(err, ErrPeerStarting) {
				starting++
				s.log.Info().Str("peer", p.Name).Int("attempt", attempt).Msg("syncUp: peer is still copying the registry itself")
				continue
			}
			if err != nil {
				s.log.Warn().Err(err).Str("peer", p.Name).Int("attempt", attempt).Msg("syncUp: peer did not answer")
				continue
			}
			res.Reached, res.Source, res.Instances = true, p.Name, n
			s.log.Info().Str("peer", p.Name).Str("zone", p.Zone).Int("instances", n).Int("attempt", attempt).
				Msg("syncUp: registry copied")
			return res
		}
		// Every peer is starting as well (the whole cluster is): none has a
		// registry to give. Give them one more round, then start empty
		// rather than wait for each other.
		if starting == len(peers) {
			startingRounds++
			if startingRounds >= 2 {
				res.Reached = true
				s.log.Info().Int("peers", len(peers)).Msg("syncUp: every peer is starting too; opening with an empty registry")
				return res
			}
		} else {
			startingRounds = 0
		}
	}
	if !res.PeersKnown {
		s.log.Info().Int("attempts", res.Attempts).Msg("syncUp: no peer appeared, this node starts the registry")
		return res
	}
	s.log.Warn().Int("attempts", res.Attempts).Msg("syncUp: no peer could be reached")
	return res
}

func (s *Syncer) copyFrom(ctx context.Context, p Peer) (int, error) {
	s.mu.Lock()
	s.cancelled, s.replays = map[registry.InstanceKey]struct{}{}, nil
	s.mu.Unlock()
	s.active.Store(true)
	defer func() {
		s.active.Store(false)
		s.mu.Lock()
		s.cancelled, s.replays = nil, nil
		s.mu.Unlock()
	}()

	fetchCtx, cancel := context.WithTimeout(ctx, s.cfg.FetchTimeout)
	defer cancel()
	instances, err := s.cfg.Fetch(fetchCtx, p)
	if err != nil {
		return 0, err
	}
	copied, refused := 0, 0
	defer func() {
		if refused > 1 {
			s.log.Warn().Int("refused", refused).Str("peer", p.Name).Msg("syncUp: instances refused")
		}
	}()
	for _, in := range instances {
		key := registry.InstanceKey{App: in.App, ID: in.ID()}
		s.mu.Lock()
		_, gone := s.cancelled[key]
		s.mu.Unlock()
		if gone {
			continue
		}
		if _, err := s.cfg.Registry.Register(in, true); err != nil {
			if refused++; refused == 1 { // one line with the first key, then a count
				s.log.Warn().Err(err).Str("app", registry.QuotePrefix(key.App)).Str("instance_id", registry.QuotePrefix(key.ID)).
					Msg("syncUp: instance refused")
			}
			continue
		}
		copied++
	}
	// Status changes that arrived before their instance did, in order.
	// Replaying one that did apply changes nothing.
	s.mu.Lock()
	replays := s.replays
	s.mu.Unlock()
	for _, rp := range replays {
		if rp.action == registry.ActionStatusUpdate {
			_, _ = s.cfg.Registry.UpdateStatus(rp.key.App, rp.key.ID, rp.status, rp.dirty, true)
		} else {
			_, _ = s.cfg.Registry.DeleteStatusOverride(rp.key.App, rp.key.ID, rp.status, rp.dirty, true)
		}
	}
	return copied, nil
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

// fetchRegistry is GET {peer}apps as JSON, marked as replication so a peer
// that is itself still syncing answers with what it has instead of 403.
func fetchRegistry(ctx context.Context, client *http.Client, p Peer, sign RequestSigner, maxBytes int64) ([]*registry.Instance, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, joinURL(p.URL, "apps"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderReplication, "true")
	if sign != nil {
		sign(req, nil)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read registry of %s: %w", p.Name, err)
	}
	if int64(len(body)) > maxBytes {
		return nil, fmt.Errorf("registry of %s: %w (%d bytes, muster.max-sync-body-bytes)", p.Name, ErrSyncTooLarge, maxBytes)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return nil, fmt.Errorf("GET %s: %w", req.URL.Redacted(), ErrPeerStarting)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %d", req.URL.Redacted(), resp.StatusCode)
	}
	apps, err := wire.DecodeApplicationsJSON(body)
	if err != nil {
		return nil, fmt.Errorf("registry of %s: %w", p.Name, err)
	}
	var out []*registry.Instance
	for _, app := range apps.Apps {
		for _, iv := range app.Instances {
			out = append(out, iv.Instance)
		}
	}
	return out, nil
}
