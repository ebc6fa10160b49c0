package drain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
)

// Defaults of the knobs (muster.drain.*).
const (
	DefaultReaderWindow = 90 * time.Second // three 30 s fetch intervals
	DefaultMaxWait      = 5 * time.Minute
	DefaultPollInterval = time.Second
	DefaultPeerTimeout  = 2 * time.Second
)

// ClientUnreachable is the client a receipt names for a node that did not
// answer: its readers cannot be known, so the drain is not complete.
const ClientUnreachable = "(node unreachable)"

// ErrNotServed is what Config.Ask returns for a peer that does not serve
// the readers' endpoint (it answered 404: a Java Eureka server, or an
// older Muster). Its readers are not seen; the receipt lists it as
// unseen, and does not wait for it.
var ErrNotServed = errors.New("drain: peer does not report its readers")

// ErrNotDrained is Undrain's and Receipt's answer for an instance that is
// not drained.
var ErrNotDrained = errors.New("drain: instance not drained")

// Registry is what the drain needs of the registry.
type Registry interface {
	Apply(registry.Op) (*registry.Instance, error)
	Drain(app, id string) (registry.DrainMark, *registry.Instance, bool)
	Drained() []registry.DrainedInstance
}

// Peer is another node asked for its readers.
type Peer struct {
	Name, URL string
}

// Query is what a node asks a peer: its readers of App since DrainedAt
// less the window, and whether each read past the peer's own applied
// version of ID's drain.
type Query struct {
	App       string `json:"app"`
	ID        string `json:"instanceId"`
	DrainedAt int64  `json:"drainedAt"`
}

// Answer is one node's readers of a drained instance's app.
type Answer struct {
	Node string `json:"node"`
	// Applied is false while the node has not applied the drain (its
	// readers are then all pending).
	Applied   bool          `json:"applied"`
	Readers   []ReaderState `json:"readers"`
	Untracked uint64        `json:"untracked,omitempty"`
}

// Config wires a Drainer.
type Config struct {
	Registry Registry
	Readers  *Readers
	// Node is this node's name: the mark's By, the receipts' node.
	Node string
	// Window: a reader that read the app within it before the drain is
	// waited for (muster.drain.reader-window-ms).
	Window time.Duration
	// MaxWait bounds ?wait= (muster.drain.max-wait-ms); PollInterval is
	// how often a waiting drain asks again (muster.drain.poll-interval-ms);
	// PeerTimeout bounds one peer's answer.
	MaxWait, PollInterval, PeerTimeout time.Duration
	// Peers lists the other nodes; Ask asks one of them (nil: no peers).
	Peers func() []Peer
	Ask   func(ctx context.Context, p Peer, q Query) (Answer, error)
	// Now is the clock (nil: time.Now); After the waits' timer (nil: real
	// timers).
	Now    func() time.Time
	After  func(time.Duration) <-chan time.Time
	Logger zerolog.Logger
}

// Drainer drains instances and writes their receipts.
type Drainer struct {
	cfg Config
	log zerolog.Logger

	mu       sync.Mutex
	complete map[registry.InstanceKey]int64 // drains logged complete, by drainedAt
}

// New returns a Drainer of cfg (Registry and Readers must be set).
func New(cfg Config) *Drainer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultReaderWindow
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.PeerTimeout <= 0 {
		cfg.PeerTimeout = DefaultPeerTimeout
	}
	if cfg.Peers == nil || cfg.Ask == nil {
		cfg.Peers = func() []Peer { return nil }
	}
	return &Drainer{cfg: cfg, log: cfg.Logger.With().Str("component", "drain").Logger(),
		complete: map[registry.InstanceKey]int64{}}
}

// MaxWait is the longest wait a drain may be asked to block for.
func (d *Drainer) MaxWait() time.Duration { return d.cfg.MaxWait }

// Readers is the node's reader table.
func (d *Drainer) Readers() *Readers { return d.cfg.Readers }

// Pending is a reader a drain still waits for.
type Pending struct {
	Client   string `json:"client"`
	Address  string `json:"address"`
	Node     string `json:"node"`
	LastRead int64  `json:"lastRead"`
}

// NodeProgress is one node's part of a receipt.
type NodeProgress struct {
	Node      string `json:"node"`
	Applied   bool   `json:"applied"`
	Readers   int    `json:"readers"`
	Confirmed int    `json:"confirmed"`
	// Error says why the node did not answer ("" when it did).
	Error string `json:"error,omitempty"`
}

// Receipt is a drain's progress: POST/GET/DELETE /admin/drain's body.
type Receipt struct {
	App        string    `json:"app"`
	InstanceID string    `json:"instanceId"`
	DrainedAt  int64     `json:"drainedAt"`
	DrainedBy  string    `json:"drainedBy,omitempty"`
	Complete   bool      `json:"complete"`
	Readers    int       `json:"readers"`
	Confirmed  int       `json:"confirmed"`
	Pending    []Pending `json:"pending"`
	// Nodes is each node's part, this node first.
	Nodes []NodeProgress `json:"nodes,omitempty"`
	// Unseen are the peers that do not report readers (Java Eureka
	// servers): readers of theirs are not waited for.
	Unseen []string `json:"unseen,omitempty"`
	// Untracked counts reads the nodes could not track (their reader
	// tables were full): readers the receipt may be missing.
	Untracked uint64 `json:"untracked,omitempty"`
	// Ended says why a drain being waited for stopped being a drain before
	// every reader confirmed: EndedCancelled (the instance cancelled, or
	// was removed) or EndedUndrained (someone undrained it). The receipt is
	// then the last one taken while it was drained.
	Ended string `json:"ended,omitempty"`
}

// The values of Receipt.Ended.
const (
	EndedCancelled = "cancelled"
	EndedUndrained = "undrained"
)

// Local is this node's answer to q: its readers of the app since the
// drain less the window, judged on its own applied version of the mark.
func (d *Drainer) Local(q Query) Answer {
	a := Answer{Node: d.cfg.Node, Untracked: d.cfg.Readers.Untracked()}
	mark, _, ok := d.cfg.Registry.Drain(q.App, q.ID)
	var seq uint64
	if ok && mark.Seq != 0 {
		a.Applied, seq = true, mark.Seq
	}
	since := q.DrainedAt - d.cfg.Window.Milliseconds()
	a.Readers = d.cfg.Readers.Of(strings.ToUpper(q.App), since, seq)
	if a.Readers == nil {
		a.Readers = []ReaderState{}
	}
	return a
}

// Drain marks app/id drained (idempotent: a drained instance keeps its
// drainedAt) and returns its receipt, after waiting up to wait for every
// reader to confirm. registry.ErrInstanceNotFound when there is no such
// instance.
func (d *Drainer) Drain(ctx context.Context, app, id string, wait time.Duration) (Receipt, error) {
	now := d.cfg.Now()
	_, before, ok := d.cfg.Registry.Drain(app, id)
	if before == nil && !ok {
		return Receipt{}, registry.ErrInstanceNotFound
	}
	if _, err := d.cfg.Registry.Apply(registry.DrainOp(app, id, now.UnixMilli(), d.cfg.Node)); err != nil {
		return Receipt{}, err
	}
	rc, err := d.Receipt(ctx, app, id)
	if err != nil {
		return Receipt{}, err
	}
	if !ok {
		d.log.Info().Str("app", rc.App).Str("instance_id", id).Int("readers", rc.Readers).
			Int("confirmed", rc.Confirmed).Int("nodes", len(rc.Nodes)).Msg("drain started")
	}
	if wait <= 0 || rc.Complete {
		return rc, nil
	}
	deadline := d.cfg.After(wait)
	for !rc.Complete {
		select {
		case <-ctx.Done():
			return rc, nil
		case <-deadline:
			d.log.Warn().Str("app", rc.App).Str("instance_id", id).Dur("wait", wait).Int("readers", rc.Readers).
				Int("confirmed", rc.Confirmed).Int("pending", len(rc.Pending)).Msg("drain wait ended with readers pending")
			return rc, nil
		case <-d.cfg.After(d.cfg.PollInterval):
		}
		next, err := d.Receipt(ctx, app, id)
		if errors.Is(err, ErrNotDrained) {
			// Not an error of the request: the drain ended under it. The
			// caller learns how from the last receipt, not a bare 404 or 500.
			rc.Ended = EndedUndrained
			if _, in, _ := d.cfg.Registry.Drain(app, id); in == nil {
				rc.Ended = EndedCancelled
			}
			d.log.Warn().Str("app", rc.App).Str("instance_id", id).Str("ended", rc.Ended).Int("readers", rc.Readers).
				Int("confirmed", rc.Confirmed).Msg("drain ended during its wait")
			return rc, nil
		}
		if err != nil {
			return Receipt{}, err
		}
		rc = next
	}
	return rc, nil
}

// Receipt is the current receipt of app/id's drain, asking every peer;
// ErrNotDrained when it is not drained.
func (d *Drainer) Receipt(ctx context.Context, app, id string) (Receipt, error) {
	mark, in, ok := d.cfg.Registry.Drain(app, id)
	if !ok {
		return Receipt{}, ErrNotDrained
	}
	q := Query{App: in.App, ID: id, DrainedAt: mark.At}
	rc := Receipt{App: in.App, InstanceID: id, DrainedAt: mark.At, DrainedBy: mark.By, Pending: []Pending{}}
	rc.add(d.Local(q), nil)
	peers := d.cfg.Peers()
	answers := make([]Answer, len(peers))
	errs := make([]error, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, d.cfg.PeerTimeout)
			defer cancel()
			answers[i], errs[i] = d.cfg.Ask(pctx, p, q)
			if answers[i].Node == "" {
				answers[i].Node = p.Name
			}
		}()
	}
	wg.Wait()
	for i, p := range peers {
		if errors.Is(errs[i], ErrNotServed) {
			rc.Unseen = append(rc.Unseen, p.Name)
			continue
		}
		rc.add(answers[i], errs[i])
	}
	sort.SliceStable(rc.Pending, func(i, j int) bool {
		a, b := rc.Pending[i], rc.Pending[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Client+a.Address < b.Client+b.Address
	})
	rc.Complete = rc.Confirmed == rc.Readers
	d.noteComplete(rc)
	return rc, nil
}

// add counts one node's answer (or its failure) into the receipt.
func (rc *Receipt) add(a Answer, err error) {
	np := NodeProgress{Node: a.Node, Applied: a.Applied}
	if err != nil {
		np.Error = err.Error()
		np.Readers = 1
		rc.Readers++
		rc.Pending = append(rc.Pending, Pending{Client: ClientUnreachable, Node: a.Node})
		rc.Nodes = append(rc.Nodes, np)
		return
	}
	for _, r := range a.Readers {
		np.Readers++
		if r.Confirmed {
			np.Confirmed++
			continue
		}
		rc.Pending = append(rc.Pending, Pending{Client: r.Client, Address: r.Address, Node: a.Node, LastRead: r.LastRead})
	}
	rc.Readers += np.Readers
	rc.Confirmed += np.Confirmed
	rc.Untracked += a.Untracked
	rc.Nodes = append(rc.Nodes, np)
}

// maxLoggedComplete bounds the drains remembered as logged complete.
const maxLoggedComplete = 10_000

// noteComplete logs a drain's completion once.
func (d *Drainer) noteComplete(rc Receipt) {
	if !rc.Complete {
		return
	}
	key := registry.InstanceKey{App: rc.App, ID: rc.InstanceID}
	d.mu.Lock()
	logged := d.complete[key] == rc.DrainedAt
	if !logged && len(d.complete) >= maxLoggedComplete {
		// Drained instances that were cancelled are never undrained: forget
		// them all rather than grow (at worst a completion is logged twice).
		clear(d.complete)
	}
	d.complete[key] = rc.DrainedAt
	d.mu.Unlock()
	if !logged {
		d.log.Info().Str("app", rc.App).Str("instance_id", rc.InstanceID).Int("readers", rc.Readers).
			Int("nodes", len(rc.Nodes)).Int64("took_ms", d.cfg.Now().UnixMilli()-rc.DrainedAt).Msg("drain complete")
	}
}

// List is the receipt of every drained instance, sorted by app and id.
func (d *Drainer) List(ctx context.Context) []Receipt {
	drained := d.cfg.Registry.Drained()
	sort.Slice(drained, func(i, j int) bool {
		a, b := drained[i].Key, drained[j].Key
		return a.App < b.App || a.App == b.App && a.ID < b.ID
	})
	out := make([]Receipt, 0, len(drained))
	for _, di := range drained {
		if rc, err := d.Receipt(ctx, di.Key.App, di.Key.ID); err == nil {
			out = append(out, rc)
		}
	}
	return out
}

// Undrain lifts app/id's drain and returns the receipt it had;
// ErrNotDrained when it was not drained.
func (d *Drainer) Undrain(ctx context.Context, app, id string) (Receipt, error) {
	rc, err := d.Receipt(ctx, app, id)
	if err != nil {
		return Receipt{}, err
	}
	if _, err := d.cfg.Registry.Apply(registry.DrainOp(app, id, 0, "")); err != nil {
		return Receipt{}, fmt.Errorf("undrain: %w", err)
	}
	d.mu.Lock()
	delete(d.complete, registry.InstanceKey{App: rc.App, ID: rc.InstanceID})
	d.mu.Unlock()
	d.log.Info().Str("app", rc.App).Str("instance_id", id).Int("readers", rc.Readers).
		Int("confirmed", rc.Confirmed).Msg("drain undone")
	return rc, nil
}

// Knobs are the drain's settings (muster.drain.*, docs/configuration.md).
type Knobs struct {
	// ReaderWindow: a reader that read the app within it before the drain
	// is waited for (muster.drain.reader-window-ms).
	ReaderWindow time.Duration
	// MaxWait bounds ?wait= (muster.drain.max-wait-ms).
	MaxWait time.Duration
	// PollInterval is how often a waiting drain asks every node again
	// (muster.drain.poll-interval-ms).
	PollInterval time.Duration
	// MaxReaders caps each node's reader table (muster.drain.max-readers).
	MaxReaders int
}

// DefaultKnobs are the defaults: three 30 s fetch intervals, five
// minutes, a second, 10,000 readers.
func DefaultKnobs() Knobs {
	return Knobs{ReaderWindow: DefaultReaderWindow, MaxWait: DefaultMaxWait, PollInterval: DefaultPollInterval, MaxReaders: DefaultMaxReaders}
}

// MaxReadersLimit is the largest MaxReaders.
const MaxReadersLimit = 10_000_000

// Validate names the first knob that makes no sense.
func (k Knobs) Validate() error {
	switch {
	case k.ReaderWindow < time.Second || k.ReaderWindow > 24*time.Hour:
		return fmt.Errorf("drain: ReaderWindow must be from 1 s to 24 h, got %s", k.ReaderWindow)
	case k.MaxWait < time.Second || k.MaxWait > time.Hour:
		return fmt.Errorf("drain: MaxWait must be from 1 s to 1 h, got %s", k.MaxWait)
	case k.PollInterval < 10*time.Millisecond || k.PollInterval > time.Minute:
		return fmt.Errorf("drain: PollInterval must be from 10 ms to 1 min, got %s", k.PollInterval)
	case k.MaxReaders < 1 || k.MaxReaders > MaxReadersLimit:
		return fmt.Errorf("drain: MaxReaders must be from 1 to %d, got %d", MaxReadersLimit, k.MaxReaders)
	}
	return nil
}
