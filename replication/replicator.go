package replication

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muster-registry/muster/internal/redact"
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

	// cur is the replicator's position in the registry's change stream,
	// taken in New so that nothing applied before Run is missed. Only the
	// feed goroutine reads it.
	cur *registry.Cursor
	// renewed is the renewal feed's wake-up channel; the feed is on from New.
	renewed <-chan struct{}
	// backlogged fires when about a batch of renewals waits to be taken
	// (Store.RenewalsBacklogged): the feed takes them without waiting out
	// renewalTakeInterval.
	backlogged <-chan struct{}
	// after is the clock's timer (Config.After).
	after func(time.Duration) <-chan time.Time
	// resyncs counts the times the feed fell behind the stream.
	resyncs atomic.Uint64

	// view is the list of senders enqueue fans out to. It is replaced (never
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
	manual   bool               // driven by Flush instead of Run

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

// New returns a Replicator with no peers, positioned at the head of
// cfg.Source's change stream: every change applied from now on is sent to
// the peers Run finds. It starts no goroutines: Run does.
func New(cfg Config) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Transport == nil {
		return nil, errors.New("replication: Transport is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("replication: Store is required")
	}
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
	r.after = cfg.After
	if r.after == nil {
		r.after = time.After
	}
	r.cur = cfg.Store.Subscribe()
	r.renewed = cfg.Store.RenewalsReady()
	r.backlogged = cfg.Store.RenewalsBacklogged(cfg.batchSize(true))
	return r, nil
}

// Run starts a sender for each peer (and for peers added later by
// SetPeers) and the feed that reads the registry's changes, and blocks
// until ctx ends or Shutdown is called; then it stops them, waits for them
// and returns nil. It returns ErrClosed if Run was called before or the
// Replicator was shut down.
func (r *Replicator) Run(ctx context.Context) error {
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
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.feed(r.ctx)
	}()
	r.mu.Unlock()

	<-r.ctx.Done()

	r.mu.Lock()
	r.state = stateClosed
	r.view.Store(nil)
	r.mu.Unlock()
	r.wg.Wait()
	r.cancel()
	r.cur.Close()
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

// feed moves the registry's changes to the senders until ctx ends: this
// is the only reader of the replicator's cursor and of the renewal feed,
// and it runs outside every registry lock. On each wake-up it takes the
// renewals first and then reads the stream to its head, and hands the
// changes to the senders before the heartbeats: a renewal taken here
// belongs to a lease whose register is already in the stream, so a peer
// never gets a heartbeat before the register it depends on.
//
// Changes are handed out as soon as they are applied. Renewals are taken
// when the first one comes after a pause of renewalTakeInterval, or sooner
// when about a batch of them (the Muster batch size) waits: so at a
// moderate rate they leave in few, full batches, each of which wakes an
// otherwise idle peer once, and under a flood each take is still about a
// batch, which a peer's inbox and queue hold many times over.
func (r *Replicator) feed(ctx context.Context) {
	var fb feedBuffers
	renewed := r.renewed
	var pause <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.cur.Ready():
			r.pull(&fb, false)
			continue
		case <-pause:
			renewed, pause = r.renewed, nil
			continue
		case <-renewed:
		case <-r.backlogged:
		}
		r.pull(&fb, true)
		renewed = nil
		pause = r.after(renewalTakeInterval)
	}
}

// renewalTakeInterval is the least time between two takes of the renewal
// feed, unless a batch's worth is waiting (see feed). Peers only need a
// heartbeat within the instance's renewal interval (30 s), and Eureka's
// own batching waits 500 ms; a few hundred milliseconds are invisible to
// them, while each lease enters the feed at most once per take however
// often it renews, and the batches fill: at 2,000 heartbeats a second a
// take was ~200 of them at 100 ms, where 20 ms made batches of 40 and the
// cluster spent most of its replication CPU on HTTP round trips, and the
// receivers' wake-ups per batch were still ~⅓ of their CPU at 100 ms
// (bench replcpu). What bounds a take is its size, not this: it used to
// be the only bound, so one take at 100,000 heartbeats a second was a
// whole queue (MaxQueueSize 10,000). The lag it adds is a heartbeat's, not
// a change's (bench propagation).
const renewalTakeInterval = 500 * time.Millisecond

// feedBuffers are reused by pull across wake-ups.
type feedBuffers struct {
	events   []registry.Event
	renewals []registry.Renewal
	// tasks is one round's tasks, handed to every sender at once.
	tasks []Task
	// ordered sorts each take of renewals by time and key: the registry
	// hands them out in no fixed order, and Flush must replay a seed.
	ordered bool
}

// pull takes the renewals (when takeRenewals), reads the stream to its
// head and hands the round's tasks to every sender at once: one round of
// the feed. The renewals are taken before the stream is read, so the
// register of every renewed lease is among the changes offered first.
func (r *Replicator) pull(fb *feedBuffers, takeRenewals bool) {
	if fb.events == nil {
		fb.events = make([]registry.Event, 0, 256)
	}
	fb.renewals = fb.renewals[:0]
	if takeRenewals {
		fb.renewals = r.cfg.Store.TakeRenewals(fb.renewals)
	}
	if fb.ordered {
		slices.SortFunc(fb.renewals, func(a, b registry.Renewal) int {
			if c := a.At.Compare(b.At); c != 0 {
				return c
			}
			return strings.Compare(a.Key.String(), b.Key.String())
		})
	}
	fb.tasks = fb.tasks[:0]
	for {
		var resync bool
		fb.events, resync = r.cur.Read(fb.events)
		if resync {
			// What was read before the gap goes first; the catch-up
			// follows it.
			r.handOut(fb, false)
			r.resync()
			continue
		}
		if len(fb.events) == 0 {
			break
		}
		for _, ev := range fb.events {
			if t, ok := TaskFromEvent(ev); ok {
				fb.tasks = append(fb.tasks, t)
			}
		}
	}
	// A take has one renewal per lease, and a key one live lease: its
	// heartbeats are distinct, unless a change of the round shares a key
	// and action with one of them.
	distinct := len(fb.tasks) == 0
	for _, rn := range fb.renewals {
		fb.tasks = append(fb.tasks, taskFromRenewal(rn))
	}
	r.handOut(fb, distinct)
}

// handOut gives the tasks collected in fb to every sender, and empties it;
// distinct says that no two of them share an instance and action.
func (r *Replicator) handOut(fb *feedBuffers, distinct bool) {
	if ps := r.view.Load(); ps != nil && len(fb.tasks) > 0 {
		now := time.Time{}
		for i := range fb.tasks {
			if fb.tasks[i].CreatedAt.IsZero() {
				if now.IsZero() {
					now = r.now()
				}
				fb.tasks[i].CreatedAt = now
			}
		}
		for _, p := range *ps {
			p.offerAll(fb.tasks, distinct)
		}
	}
	clear(fb.tasks) // keeps no instance alive until the next round
	fb.tasks = fb.tasks[:0]
}

// Flush drives a replicator that is not Run, synchronously, for tests on
// a manual clock (the deterministic cluster in replicationtest): it moves
// what the registry applied into the senders, then lets every sender, in
// name order, take and send batches through the Transport and handle the
// answers, until none may send at now (a sender backing off waits for the
// clock to move: call Flush again after). It starts no goroutine and
// returns the number of batches sent. Calling it on a running replicator
// is an error.
func (r *Replicator) Flush(ctx context.Context) (int, error) {
	r.mu.Lock()
	if r.state != stateNew {
		r.mu.Unlock()
		return 0, ErrClosed
	}
	r.manual = true
	ps := make([]*peer, 0, len(r.peers))
	for _, p := range r.peers {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	slices.SortFunc(ps, func(a, b *peer) int { return strings.Compare(a.info.Load().Name, b.info.Load().Name) })
	if r.view.Load() == nil {
		r.mu.Lock()
		r.publishViewLocked()
		r.mu.Unlock()
	}

	fb := feedBuffers{ordered: true}
	sent := 0
	for {
		r.pull(&fb, true)
		progressed := false
		for _, p := range ps {
			now := r.now()
			p.catchUpIfAsked(now)
			p.takeInbox(now)
			if f, _ := p.step(now); f != nil {
				p.onResult(p.send(ctx, f), r.now())
				sent++
				progressed = true
			}
			p.publish()
		}
		if !progressed {
			return sent, nil
		}
	}
}

// resync runs when the feed fell so far behind the registry's stream that
// changes it had not read were overwritten (registry.Config.OutboxSize).
// It does not guess what was lost: every sender catches up as a new one
// does, with a heartbeat for every live instance, and the peers ask, with
// 404 and 409, for what they lack. That restores every register and newer
// copy; a cancel that was lost leaves the instance on the peer until its
// lease runs out there, since no heartbeat comes for it. Heartbeats, not
// registers, because a peer that holds the instance stores nothing and
// makes no change of its own: two nodes that resync cannot set each other
// off.
func (r *Replicator) resync() {
	r.resyncs.Add(1)
	ps := r.view.Load()
	n := 0
	if ps != nil {
		n = len(*ps)
		for _, p := range *ps {
			p.askCatchUp()
		}
	}
	r.log.Warn().Int(logPeers, n).
		Msg("replication fell behind the registry's change stream; every peer gets a heartbeat for every live instance")
}

// Backlog is how many of the registry's changes the feed has not read yet.
// Together with each peer's QueueDepth and InFlight it tells whether
// everything applied so far has been sent.
func (r *Replicator) Backlog() uint64 { return r.cur.Lag() }

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
			np.Name = redact.URL(np.URL)
		}
		if np.Name == "" {
			r.log.Warn().Msg("peer without name or URL ignored")
			continue
		}
		if _, dup := want[np.Name]; dup {
			r.log.Warn().Str(logPeer, np.Name).Str(logURL, redact.URL(np.URL)).Msg("duplicate peer name ignored")
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
				p.log.Info().Str(logURL, redact.URL(np.URL)).Str(logZone, np.Zone).Str(logOldURL, redact.URL(old.URL)).Msg("peer address changed")
			}
			continue
		}
		p := newPeer(&r.cfg, r.now, r.log, np)
		r.peers[name] = p
		if r.state == stateRunning || r.manual {
			// The feed has already handed earlier changes to the senders
			// that existed then: this one catches up from the registry.
			// Peers set before Run need not: the feed starts with them.
			p.catchUp = true
		}
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

// MarkMuster records that the named peer is a Muster node (it served
// anti-entropy): from its next batch on, items carry write versions, as
// they do to memberlist members. A static peer that is a Muster node thus
// takes part in the winner rule on the replication path too.
func (r *Replicator) MarkMuster(name string) {
	r.mu.Lock()
	p := r.peers[name]
	r.mu.Unlock()
	if p != nil {
		p.muster.Store(true)
	}
}

// PeerList returns the current peers, sorted by name: whom anti-entropy
// reconciles with.
func (r *Replicator) PeerList() []Peer {
	r.mu.Lock()
	out := make([]Peer, 0, len(r.peers))
	for _, p := range r.peers {
		out = append(out, *p.info.Load())
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Totals returns the counters summed over all senders, including those of
// peers already removed.
func (r *Replicator) Totals() Counters {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.retired
	t.Resyncs = r.resyncs.Load()
	for _, p := range r.peers {
		t.add(p.snapshot().Counters)
	}
	for p := range r.stopping {
		t.add(p.snapshot().Counters)
	}
	return t
}
