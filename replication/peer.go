package replication

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// peer is the sender for one peer. One goroutine (run) owns everything
// below the "owned" line: the batcher, the batch in flight and the backoff
// state. Other goroutines touch only the inbox (under inboxMu), inboxFull,
// info and, under statsMu, stats.
//
// The decisions live in step and onResult, which take the time and start
// nothing, so tests drive them with a moved clock and no goroutines; run only
// wires them to channels and a timer.
type peer struct {
	cfg *Config // shared with the Replicator; read-only
	now func() time.Time
	log zerolog.Logger

	// info is the peer's current name, URL and zone. SetPeers replaces it
	// when the URL or zone changes; the next batch uses the new one.
	info atomic.Pointer[Peer]
	// muster is set once the peer has shown it is a Muster node (it
	// answered anti-entropy): its batches carry versions even if it is a
	// static peer.
	muster atomic.Bool
	// inbox hands tasks from the feed to the owner; producers never block.
	// The feed appends a whole round (one take of renewals, the changes
	// read with it) under inboxMu and wakes the owner once: the round then
	// leaves in one batch. A channel of tasks woke the owner at the first
	// one, and it sent the few that had arrived while the rest of the take
	// was still being handed over: three or four batches per take, each a
	// round trip and a request the peer wakes up for (bench replcpu).
	inboxMu sync.Mutex
	inbox   []Task
	// inboxDistinct: the inbox holds one round whose tasks have distinct
	// instances and actions (the batcher may keep it as it came).
	inboxDistinct bool
	// inboxFull counts tasks Enqueue dropped because inbox was full.
	inboxFull atomic.Uint64
	// results carries the answer of the batch in flight (capacity 1: at
	// most one batch is in flight).
	results chan sendResult
	// cancel stops a started sender; nil until the Replicator starts it.
	// The Replicator reads and writes it under its mu.
	cancel context.CancelFunc
	// catchUp makes the sender queue a heartbeat for every live instance
	// when it starts (queueCatchUp). Set by the Replicator before start.
	catchUp bool
	// resync asks a running sender for the same catch-up (the feed fell
	// behind the registry's stream). kick wakes the sender to see it, or to
	// take the inbox.
	resync atomic.Bool
	kick   chan struct{}

	// --- owned by the peer's goroutine ---
	b *batcher
	// spare is the inbox's other buffer: takeInbox swaps them, so the
	// hand-off allocates nothing in the steady state.
	spare    []Task
	flight   *flight   // the batch in flight; nil when none
	failures int       // consecutive failed batches
	retryAt  time.Time // no batch goes out before this (backoff)
	c        Counters  // own counters; batcher and inbox counts are merged in counters()

	lastBatch     time.Duration
	lastBatchSize int
	lastErr       string
	lastErrAt     time.Time
	lastLag       time.Duration
	maxLag        time.Duration

	warnSend, warnItems, warnDrops logLimiter
	// errRefused limits the Error lines about tasks dropped for good
	// (refused items, too large ones); its own limiter, so that transient
	// failures cannot hide them.
	errRefused logLimiter
	// byteBudget is the batch size in bytes for this peer: MaxBatchBytes,
	// halved after each 413 (0: no cap).
	byteBudget  int
	warnedDrops Drops // drops already reported by a Warn line
	// answered: the peer has taken a batch once. Until then a refused
	// connection or a 503 is a peer still starting (startingLogged: said
	// once, at info level), not a failure worth a warning per batch.
	answered, startingLogged bool

	// statsMu guards stats, the owner's last published view for Peers().
	statsMu sync.Mutex
	stats   PeerStats
}

// flight is a batch on its way to the peer.
type flight struct {
	peer    Peer
	batch   Batch
	started time.Time
}

// sendResult is the answer to a flight.
type sendResult struct {
	res BatchResult
	err error
}

func newPeer(cfg *Config, now func() time.Time, log zerolog.Logger, info Peer) *peer {
	p := &peer{
		kick:    make(chan struct{}, 1),
		cfg:     cfg,
		now:     now,
		log:     log.With().Str(logPeer, info.Name).Logger(),
		results: make(chan sendResult, 1),
		b:       newBatcher(cfg.MaxQueueSize, cfg.TaskMaxAge, cfg.ExpectedRenewalInterval),

		byteBudget: cfg.MaxBatchBytes,
	}
	p.info.Store(&info)
	return p
}

// offerAll hands tasks to the sender, in order, without blocking, and wakes
// it once; distinct says that no two of them share an instance and action.
// A full inbox (InboxSize) drops a task, and the drop is counted. A
// heartbeat finds it full at three quarters, so a take of many renewals
// cannot crowd out the changes that follow it (a dropped heartbeat is
// replaced by the instance's next one). Safe for concurrent use; tasks is
// copied, not kept.
func (p *peer) offerAll(tasks []Task, distinct bool) {
	if len(tasks) == 0 {
		return
	}
	limit := max(p.cfg.InboxSize, 1)
	heartbeatLimit := limit - limit/4
	dropped := 0
	p.inboxMu.Lock()
	p.inboxDistinct = distinct && len(p.inbox) == 0
	for i := range tasks {
		if n := len(p.inbox); n >= limit || tasks[i].Action == registry.ActionHeartbeat && n >= heartbeatLimit {
			dropped++
			continue
		}
		p.inbox = append(p.inbox, tasks[i])
	}
	p.inboxMu.Unlock()
	if dropped > 0 {
		p.inboxFull.Add(uint64(dropped))
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// inboxLen is how many tasks wait in the inbox. Safe for concurrent use.
func (p *peer) inboxLen() int {
	p.inboxMu.Lock()
	defer p.inboxMu.Unlock()
	return len(p.inbox)
}

// run is the sender's goroutine: it moves tasks from the inbox into the
// batcher, starts a batch whenever step says so (the Send runs in its own
// goroutine, added to wg, so the inbox keeps draining meanwhile), hands the
// answer to onResult and sleeps out backoffs. It returns when ctx ends,
// after the batch in flight, if any, has been answered or aborted.
func (p *peer) run(ctx context.Context, wg *sync.WaitGroup) {
	p.log.Info().Str(logURL, redact.URL(p.info.Load().URL)).Str(logZone, p.info.Load().Zone).Msg("peer sender started")
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		now := p.now()
		p.catchUpIfAsked(now)
		p.takeInbox(now)
		if f, wait := p.step(now); f != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.results <- p.send(ctx, f)
			}()
		} else if wait > 0 {
			timer.Reset(wait)
		}
		p.warnDropsIfAny(now)
		p.publish()

		select {
		case <-ctx.Done():
			if p.flight != nil {
				p.onResult(<-p.results, p.now())
			}
			p.publish()
			p.log.Info().Int(logQueued, p.b.len()+p.inboxLen()).Msg("peer sender stopped")
			return
		case r := <-p.results:
			p.onResult(r, p.now())
		case <-timer.C:
		case <-p.kick:
		}
	}
}

// askCatchUp asks the sender for a catch-up; safe from any goroutine.
func (p *peer) askCatchUp() {
	p.resync.Store(true)
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// catchUpIfAsked runs queueCatchUp once for a new sender and once per
// askCatchUp. Owner only.
func (p *peer) catchUpIfAsked(now time.Time) {
	if p.catchUp || p.resync.Swap(false) {
		p.catchUp = false
		p.queueCatchUp(now)
	}
}

// queueCatchUp queues a heartbeat for every instance whose client renews
// through this node (Store.ClientLive). A peer that joined after some
// changes were made here, or whose sender started only after membership
// reported it (the changes in between reached no queue), learns of them
// through Eureka's own repair dialogue: it answers 404 for an instance it
// lacks (a Register of the local copy follows), 409 with a newer copy, 200
// for one it has. A heartbeat is cheaper than a Register for the peer that
// is up to date: no new version, no delta entry, no re-encoded payload.
// Copies this node only heard of from peers are left out: if one was
// cancelled elsewhere while this node was cut off, replaying it would
// register it again on every peer.
func (p *peer) queueCatchUp(now time.Time) {
	if p.cfg.Store == nil {
		return
	}
	n := 0
	for _, in := range p.cfg.Store.ClientLive() {
		p.b.add(Task{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: in.App, ID: in.ID()}, Instance: in, CreatedAt: now}, now)
		n++
	}
	p.c.CatchUps += uint64(n)
	if n > 0 {
		p.log.Info().Int(logCount, n).Msg("peer sender catching up: a heartbeat for every instance renewing through this node")
	}
}

// takeInbox moves everything waiting in the inbox into the batcher, in
// order. Owner only.
func (p *peer) takeInbox(now time.Time) {
	p.inboxMu.Lock()
	tasks, distinct := p.inbox, p.inboxDistinct
	p.inbox, p.inboxDistinct = p.spare[:0], false
	p.inboxMu.Unlock()
	p.b.addRound(tasks, distinct, now)
	clear(tasks) // the spare buffer keeps no instance alive
	p.spare = tasks[:0]
}

// send performs one flight. It runs in its own goroutine in production and
// directly in tests.
func (p *peer) send(ctx context.Context, f *flight) sendResult {
	if p.cfg.SendTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.SendTimeout)
		defer cancel()
	}
	res, err := p.cfg.Transport.Send(ctx, f.peer, f.batch)
	if err != nil {
		err = fmt.Errorf("send batch to %s: %w", f.peer.Name, err)
	}
	return sendResult{res: res, err: err}
}

// step decides what the sender does at now. With a batch in flight it
// does nothing: at most one batch per peer is in flight, and what arrives
// meanwhile makes the next batch (batching by back-pressure, no fixed
// delay). While backing off it returns how long is left. Otherwise it takes
// the next batch, marks it in flight and returns it for sending at once; a
// lone task on an idle sender goes out immediately.
func (p *peer) step(now time.Time) (f *flight, wait time.Duration) {
	if p.flight != nil {
		return nil, 0
	}
	if now.Before(p.retryAt) {
		return nil, p.retryAt.Sub(now)
	}
	info := *p.info.Load()
	versioned := info.Muster || p.muster.Load()
	tasks, tooLarge := p.b.takeSized(now, p.cfg.batchSize(versioned), p.byteBudget, taskWireSize)
	for i := range tooLarge {
		p.dropForGood(&tooLarge[i], "too_large", 0, now)
	}
	if len(tasks) == 0 {
		return nil, 0
	}
	lag := max(now.Sub(oldestCreated(tasks)), 0)
	p.lastLag = lag
	p.maxLag = max(p.maxLag, lag)
	p.flight = &flight{peer: info, batch: Batch{Tasks: tasks, Versioned: versioned}, started: now}
	return p.flight, 0
}

// onResult takes the answer to the batch in flight:
//   - 2xx: success; each item is looked at (handleItems);
//   - 503: congestion; the batch goes back to the front of the queue and the
//     sender waits backoff(CongestionRetryDelay, failures, max);
//   - a network error or timeout: the same, with NetworkFailureRetryDelay;
//   - any other status: the batch is dropped and counted (Drops.Permanent);
//   - cancelled because the sender stops: back to the queue, nothing counted.
func (p *peer) onResult(r sendResult, now time.Time) {
	f := p.flight
	if f == nil {
		return
	}
	p.flight = nil
	tasks := f.batch.Tasks
	p.lastBatch = now.Sub(f.started)
	p.lastBatchSize = len(tasks)
	o := classify(r.err)
	p.log.Debug().Int(logBatchSize, len(tasks)).Dur(logDuration, p.lastBatch).
		Stringer(logOutcome, o).Err(r.err).Msg("batch answered")

	switch o {
	case outcomeSuccess:
		if !p.answered && p.startingLogged {
			p.log.Info().Int(logFailures, p.failures).Msg("peer is up: batches flow")
		}
		p.answered = true
		p.failures = 0
		p.c.BatchesSent++
		p.c.ItemsSent += uint64(len(tasks))
		p.handleItems(tasks, r.res.Items, now)
	case outcomeCongestion, outcomeTransient:
		p.failures++
		p.c.Retries++
		base, ceiling := p.cfg.NetworkFailureRetryDelay, p.cfg.MaxNetworkFailureRetryDelay
		if o == outcomeCongestion {
			base, ceiling = p.cfg.CongestionRetryDelay, p.cfg.MaxCongestionRetryDelay
		}
		delay := backoff(base, p.failures, ceiling)
		p.retryAt = now.Add(delay)
		p.b.requeueFront(tasks, now)
		p.setErr(r.err, now)
		if !p.answered && PeerStarting(r.err) {
			if !p.startingLogged {
				p.startingLogged = true
				p.log.Info().Err(r.err).Dur(logRetryIn, delay).
					Msg("peer not answering yet (still starting?); batches are kept and retried, logged again once it answers")
			} else {
				p.log.Debug().Err(r.err).Int(logFailures, p.failures).Dur(logRetryIn, delay).Msg("peer still starting")
			}
			return
		}
		if ok, suppressed := p.warnSend.allow(now, p.cfg.LogInterval); ok {
			p.log.Warn().Err(r.err).Stringer(logOutcome, o).Int(logBatchSize, len(tasks)).
				Int(logFailures, p.failures).Dur(logRetryIn, delay).Int(logSuppressed, suppressed).
				Msg("batch failed; retrying after backoff")
		}
	case outcomePermanent:
		if se := (*StatusError)(nil); errors.As(r.err, &se) && se.Code == http.StatusRequestEntityTooLarge {
			p.tooLargeForPeer(tasks, now)
			return
		}
		p.failures++
		p.c.Drops.Permanent += uint64(len(tasks))
		p.setErr(r.err, now)
		if ok, suppressed := p.errRefused.allow(now, p.cfg.LogInterval); ok {
			p.log.Error().Err(r.err).Int(logBatchSize, len(tasks)).Int(logFailures, p.failures).
				Str(logApp, tasks[0].Key.App).Str(logInstanceID, tasks[0].Key.ID).
				Uint64(logDroppedPermanent, p.c.Drops.Permanent).Int(logSuppressed, suppressed).
				Msg("peer rejected batch; dropped (first task's key shown)")
		}
	case outcomeAborted:
		p.b.requeueFront(tasks, now)
	}
}

func (p *peer) setErr(err error, now time.Time) {
	p.lastErr = err.Error()
	p.lastErrAt = now
}

// handleItems acts on the per-item answers of a successful batch, as
// Eureka's ReplicationTaskProcessor and PeerEurekaNode do: a heartbeat's 404
// queues a Register of the local instance, a heartbeat's 409 adopts the
// peer's newer instance, a cancel's 404 is fine. An answer whose length
// differs from the batch cannot be matched to tasks, so it is skipped.
func (p *peer) handleItems(tasks []Task, items []wire.ItemResult, now time.Time) {
	if len(items) != len(tasks) {
		if ok, suppressed := p.warnItems.allow(now, p.cfg.LogInterval); ok {
			p.log.Warn().Int(logBatchSize, len(tasks)).Int(logCount, len(items)).Int(logSuppressed, suppressed).
				Msg("peer answered a different number of items than sent; item results ignored")
		}
		return
	}
	for i := range items {
		it, t := &items[i], &tasks[i]
		code := it.StatusCode
		if code >= 200 && code < 300 {
			continue
		}
		switch {
		case t.Action == registry.ActionHeartbeat && code == 404:
			p.reregister(t, now)
		case t.Action == registry.ActionHeartbeat && code == 409 && it.Instance != nil && p.cfg.AdoptNewer:
			p.adopt(it.Instance)
			p.c.Adopted++
		case t.Action == registry.ActionCancel && code == 404:
			p.log.Debug().Str(logApp, t.Key.App).Str(logInstanceID, t.Key.ID).
				Msg("peer did not know the cancelled instance")
		case code >= 400 && code < 500 && code != 404 && code != 409 && code != 408 && code != 429:
			// The peer refuses the item itself (one of its limits, a body it
			// cannot read): sending it again would get the same answer.
			p.dropForGood(t, "refused", code, now)
		default:
			p.c.ItemFailures++
			if ok, suppressed := p.warnItems.allow(now, p.cfg.LogInterval); ok {
				p.log.Warn().Str(logAction, string(t.Action)).Str(logApp, t.Key.App).
					Str(logInstanceID, t.Key.ID).Int(logStatusCode, code).
					Uint64(logItemFailures, p.c.ItemFailures).Int(logSuppressed, suppressed).
					Msg("peer failed a replicated item")
			}
		}
	}
}

// dropForGood counts a task that can never reach the peer, by reason
// (too_large, refused), and logs it at error level with its key, under its
// own rate limit.
func (p *peer) dropForGood(t *Task, reason string, code int, now time.Time) {
	if reason == "too_large" {
		p.c.Drops.TooLarge++
	} else {
		p.c.Drops.Refused++
	}
	if ok, suppressed := p.errRefused.allow(now, p.cfg.LogInterval); ok {
		ev := p.log.Error().Str(logReason, reason).Str(logAction, string(t.Action)).
			Str(logApp, registry.QuotePrefix(t.Key.App)).Str(logInstanceID, registry.QuotePrefix(t.Key.ID)).
			Uint64(logTooLarge, p.c.Drops.TooLarge).Uint64(logRefused, p.c.Drops.Refused).Int(logSuppressed, suppressed)
		if code != 0 {
			ev = ev.Int(logStatusCode, code)
		}
		ev.Msg("replication task dropped for good: the peer will never accept it")
	}
}

// tooLargeForPeer handles a 413 to a whole batch: the peer's limit is below
// our budget. A batch of several tasks goes back to the queue and the
// budget halves (and the tasks go out in smaller batches at once); a single
// task is dropped for good.
func (p *peer) tooLargeForPeer(tasks []Task, now time.Time) {
	if len(tasks) == 1 {
		p.dropForGood(&tasks[0], "too_large", http.StatusRequestEntityTooLarge, now)
		return
	}
	size := 0
	for i := range tasks {
		size += taskWireSize(&tasks[i])
	}
	if p.byteBudget <= 0 || p.byteBudget > size {
		p.byteBudget = size
	}
	p.byteBudget = max(p.byteBudget/2, 1)
	p.c.Retries++
	p.b.requeueFront(tasks, now)
	p.log.Warn().Int(logBatchSize, len(tasks)).Int(logBatchBytes, size).Int(logByteBudget, p.byteBudget).
		Msg("peer refused a batch as too large (413); sending it in smaller batches")
}

// reregister answers a heartbeat's 404 (the peer lost the instance) with a
// Register of the local instance, queued like any other task. If the
// instance is gone locally, a cancel is on its way and nothing is needed.
func (p *peer) reregister(t *Task, now time.Time) {
	iv, ok := p.cfg.Store.Instance(t.Key.App, t.Key.ID)
	inst := iv.Instance
	if !ok || inst == nil {
		p.log.Debug().Str(logApp, t.Key.App).Str(logInstanceID, t.Key.ID).
			Msg("peer lost an instance that is gone here too")
		return
	}
	p.b.add(Task{Action: registry.ActionRegister, Key: t.Key, Instance: inst, CreatedAt: now}, now)
	p.c.Reregistered++
}

// adopt applies a peer's newer copy of an instance, answered with a 409 to
// our heartbeat (PeerEurekaNode#syncInstancesIfTimestampDiffers). It comes
// from a peer, so it is not sent back, and it only replaces an older stored
// copy: one cancelled here meanwhile stays cancelled.
func (p *peer) adopt(in *registry.Instance) {
	op := registry.RegisterOp(in).From(registry.OriginPeer)
	op.OnlyIfNewer = true
	if _, err := p.cfg.Store.Apply(op); err != nil {
		p.log.Warn().Err(err).Str(logApp, in.App).Str(logInstanceID, in.ID()).Msg("peer's newer instance refused")
	}
}

// warnDropsIfAny logs a Warn line (at most one per LogInterval) when tasks
// were dropped for overflow, expiry or a full inbox since the last line.
// Permanent drops are reported where they happen.
func (p *peer) warnDropsIfAny(now time.Time) {
	d := p.counters().Drops
	w := p.warnedDrops
	if d.Overflow == w.Overflow && d.Expired == w.Expired && d.InboxFull == w.InboxFull {
		return
	}
	if ok, _ := p.warnDrops.allow(now, p.cfg.LogInterval); !ok {
		return
	}
	p.log.Warn().
		Uint64(logOverflow, d.Overflow-w.Overflow).
		Uint64(logExpired, d.Expired-w.Expired).
		Uint64(logInboxFull, d.InboxFull-w.InboxFull).
		Uint64(logDroppedTotal, d.Total()).
		Int(logQueued, p.b.len()).
		Msg("replication tasks dropped")
	p.warnedDrops = d
}

// counters merges the sender's, the batcher's and the inbox's counts.
// Owner only.
func (p *peer) counters() Counters {
	c := p.c
	c.Replaced = p.b.replaced
	c.Drops.Overflow = p.b.overflow
	c.Drops.Expired = p.b.expired
	c.Drops.InboxFull = p.inboxFull.Load()
	return c
}

// publish stores the owner's view for Peers(). Owner only.
func (p *peer) publish() {
	s := PeerStats{
		QueueDepth:      p.b.len(),
		Failures:        p.failures,
		LastBatchMillis: p.lastBatch.Milliseconds(),
		LastBatchSize:   p.lastBatchSize,
		LastError:       p.lastErr,
		LastErrorAt:     p.lastErrAt,
		LastLag:         p.lastLag,
		MaxLag:          p.maxLag,
		Counters:        p.counters(),
	}
	if p.flight != nil {
		s.InFlight = len(p.flight.batch.Tasks)
	}
	p.statsMu.Lock()
	p.stats = s
	p.statsMu.Unlock()
}

// snapshot returns the last published view with the live parts (identity,
// inbox) filled in. Safe for concurrent use.
func (p *peer) snapshot() PeerStats {
	p.statsMu.Lock()
	s := p.stats
	p.statsMu.Unlock()
	info := p.info.Load()
	s.Name, s.URL, s.Zone = info.Name, redact.URL(info.URL), info.Zone
	s.QueueDepth += p.inboxLen()
	s.Drops.InboxFull = p.inboxFull.Load()
	return s
}

// logLimiter lets one log line of a kind through per interval and counts
// the ones it holds back. Pure: the caller passes the time.
type logLimiter struct {
	next       time.Time
	suppressed int
}

// allow reports whether a line may be written at now and, if so, how many
// were held back since the last one.
func (l *logLimiter) allow(now time.Time, every time.Duration) (ok bool, suppressed int) {
	if now.Before(l.next) {
		l.suppressed++
		return false, 0
	}
	suppressed, l.suppressed = l.suppressed, 0
	l.next = now.Add(every)
	return true, suppressed
}
