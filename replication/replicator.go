package replication

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/rs/zerolog"
)

// ErrClosed is returned by Run after Shutdown, or when Run is called twice.
var ErrClosed = errors.New("replication: replicator already running or shut down")

// Replicator sends every local change to every peer. It owns one sender
// per peer; see the package documentation for a batch's lifecycle.
type Replicator struct {
	cfg Config
	now func() time.Time
	log zerolog.Logger

	// view is the list of senders Enqueue fans out to. It is replaced (never
	// modified) under mu, so Enqueue reads it without a lock.
	view atomic.Pointer[[]*peer]

	// mu guards state, ctx, cancel, peers, stopping and retired.
	mu       sync.Mutex
	state    runState
	ctx      context.Context // the senders' parent; set by Run
	cancel   context.CancelFunc
	peers    map[string]*peer   // by Peer.Name
	stopping map[*peer]struct{} // removed senders still finishing their batch
	retired  Counters           // final counts of removed senders

	// wg counts sender goroutines and their Send goroutines.
	wg   sync.WaitGroup
	done chan struct{} // closed when Run returns
}

type runState int

const (
	stateNew runState = iota
	stateRunning
	stateClosed
)

// New returns a Replicator with no peers. It starts no goroutines: Run
// does. cfg should pass Validate; Run reports it if it does not.
func New(cfg Config) *Replicator {
	r := &Replicator{
		cfg:      cfg,
		now:      cfg.Now,
		log:      cfg.Logger.With().Str(logComponent, "replication").Logger(),
		peers:    make(map[string]*peer),
		stopping: make(map[*peer]struct{}),
		done:     make(chan struct{}),
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// Run starts a sender for each peer (and for peers added later by
// SetPeers) and blocks until ctx ends or Shutdown is called; then it stops
// the senders, waits for them and returns nil. It returns at once with the
// config's error if Validate fails, and ErrClosed if Run was called before
// or the Replicator was shut down.
func (r *Replicator) Run(ctx context.Context) error {
	if err := r.cfg.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	if r.state != stateNew {
		r.mu.Unlock()
		return ErrClosed
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.state = stateRunning
	for _, p := range r.peers {
		r.startLocked(p)
	}
	r.mu.Unlock()

	<-r.ctx.Done()

	r.mu.Lock()
	r.state = stateClosed
	r.view.Store(nil)
	r.mu.Unlock()
	r.wg.Wait()
	r.cancel()
	close(r.done)
	return nil
}

// Shutdown stops every sender and waits until they and their requests
// have returned; queued tasks are discarded. It is safe to call more than
// once, and before Run (which then returns ErrClosed).
func (r *Replicator) Shutdown() {
	r.mu.Lock()
	r.state = stateClosed
	cancel := r.cancel // nil unless Run has started
	r.view.Store(nil)
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-r.done
}

// Enqueue is the registry's change hook: it queues c for every peer. It
// never blocks and does not allocate (it runs for every heartbeat). A
// Replicated change (a peer's write) is never forwarded again. A peer
// whose inbox is full loses the task, counted as Drops.InboxFull.
func (r *Replicator) Enqueue(c registry.Change) {
	t, ok := TaskFromChange(c)
	if !ok {
		return
	}
	ps := r.view.Load()
	if ps == nil {
		return
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = r.now()
	}
	for _, p := range *ps {
		p.offer(t)
	}
}

// SetPeers replaces the peer list. Peers are matched by Name: a new name
// gets a sender (started at once if Run is running), a missing name has
// its sender stopped and its queue discarded, and a name that stays keeps
// its sender and queue, taking the new URL and zone for the next batch. A
// peer without a Name is named by its URL; of two peers with one name the
// first wins. It never waits for a sender to stop.
func (r *Replicator) SetPeers(peers []Peer) {
	want := make(map[string]Peer, len(peers))
	for _, np := range peers {
		if np.Name == "" {
			np.Name = RedactURL(np.URL)
		}
		if np.Name == "" {
			r.log.Warn().Msg("peer without name or URL ignored")
			continue
		}
		if _, dup := want[np.Name]; dup {
			r.log.Warn().Str(logPeer, np.Name).Str(logURL, RedactURL(np.URL)).Msg("duplicate peer name ignored")
			continue
		}
		want[np.Name] = np
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == stateClosed {
		return
	}
	for name, p := range r.peers {
		if _, ok := want[name]; !ok {
			delete(r.peers, name)
			r.stopLocked(p)
		}
	}
	for name, np := range want {
		if p, ok := r.peers[name]; ok {
			if old := p.info.Load(); *old != np {
				p.info.Store(&np)
				p.log.Info().Str(logURL, RedactURL(np.URL)).Str(logZone, np.Zone).Str("old_url", RedactURL(old.URL)).Msg("peer address changed")
			}
			continue
		}
		p := newPeer(&r.cfg, r.now, r.log, np)
		r.peers[name] = p
		if r.state == stateRunning {
			r.startLocked(p)
		}
	}
	r.publishViewLocked()
}

// startLocked starts p's sender. r.mu must be held and the state running.
func (r *Replicator) startLocked(p *peer) {
	ctx, cancel := context.WithCancel(r.ctx)
	p.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		p.run(ctx, &r.wg)
		r.retire(p)
	}()
}

// stopLocked stops the sender of a removed peer. A started one keeps
// counting until it has stopped, then retire folds its counts into the
// totals; one never started is folded now. r.mu must be held.
func (r *Replicator) stopLocked(p *peer) {
	if p.cancel == nil {
		r.retired.add(p.snapshot().Counters)
		return
	}
	r.stopping[p] = struct{}{}
	p.cancel()
}

// retire runs when p's sender has stopped. If p was removed, its final
// counts join the totals of removed peers.
func (r *Replicator) retire(p *peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.stopping[p]; ok {
		delete(r.stopping, p)
		r.retired.add(p.snapshot().Counters)
	}
}

func (r *Replicator) publishViewLocked() {
	if r.state == stateClosed {
		r.view.Store(nil)
		return
	}
	ps := make([]*peer, 0, len(r.peers))
	for _, p := range r.peers {
		ps = append(ps, p)
	}
	r.view.Store(&ps)
}

// Peers returns each current peer's sender figures, sorted by name.
func (r *Replicator) Peers() []PeerStats {
	r.mu.Lock()
	out := make([]PeerStats, 0, len(r.peers))
	for _, p := range r.peers {
		out = append(out, p.snapshot())
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b PeerStats) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Totals returns the counters summed over all senders, including those of
// peers already removed.
func (r *Replicator) Totals() Counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.retired
	for _, p := range r.peers {
		t.add(p.snapshot().Counters)
	}
	for p := range r.stopping {
		t.add(p.snapshot().Counters)
	}
	return t
}
