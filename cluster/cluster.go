package cluster

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"
)

// ErrShutdown is returned by Start after Shutdown.
var ErrShutdown = errors.New("cluster: shut down")

// State is a member's state, in memberlist's words.
type State string

const (
	StateAlive   State = "alive"   // answering probes
	StateSuspect State = "suspect" // missed probes; dead unless it refutes in time
	StateDead    State = "dead"    // failure detection gave up on it
	StateLeft    State = "left"    // announced its departure (Shutdown)
)

// gone reports whether s is dead or left.
func (s State) gone() bool { return s == StateDead || s == StateLeft }

// Member is one node as this node sees it.
type Member struct {
	Name      string // memberlist node name, unique in the cluster
	Addr      string // gossip IP address the node advertises
	Port      int    // gossip port the node advertises
	Zone      string // from the node's metadata
	EurekaURL string // from the node's metadata; "" if unset or unparsable
	State     State
	Self      bool // this node, by name
}

// entry is a Member plus the times reconcileLocked acts on.
type entry struct {
	Member
	goneAt       time.Time // when it went dead or left; forgotten after the retention
	suspectUntil time.Time // while suspect: when memberlist must have decided
}

// Cluster is this node's membership in a Muster cluster. New builds it,
// Start joins the gossip, Shutdown leaves. All methods are safe for
// concurrent use.
type Cluster struct {
	cfg       Config // validated; Memberlist is New's private copy
	name      string
	log       zerolog.Logger // component=cluster
	delegate  *delegate      // node metadata
	retention time.Duration  // how long dead and left members stay listed
	changes   chan struct{}  // capacity 1: a pending notification coalesces the next ones
	joined    atomic.Bool
	gate      logGate

	// mu guards members, metaWarned and closed. Nothing blocks while it is
	// held: no channel send, no logging, no memberlist call.
	mu         sync.Mutex
	members    map[string]entry // by name, self included
	metaWarned map[string]bool  // peers whose unparsable metadata was logged
	closed     bool             // Shutdown finished: ignore late memberlist callbacks

	// lifeMu serializes Start and Shutdown and guards ml, cancel, started
	// and stopped.
	lifeMu  sync.Mutex
	ml      *memberlist.Memberlist
	cancel  context.CancelFunc
	started bool
	stopped bool

	wg sync.WaitGroup // the reconcile and join loops
}

// New validates cfg and returns a Cluster that has not started: it opens no
// socket and starts no goroutine.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := newDelegate(nodeMeta{Zone: cfg.Zone, URL: cfg.EurekaURL})
	if err != nil {
		return nil, fmt.Errorf("cluster: encode node metadata: %w", err) // Validate has checked it
	}
	mlc := *cfg.Memberlist
	cfg.Memberlist = &mlc
	cfg.Join = slices.Clone(cfg.Join)
	cfg.SecretKey = slices.Clone(cfg.SecretKey)
	cfg.SecretKeys = cloneKeys(cfg.SecretKeys)

	c := &Cluster{
		cfg:        cfg,
		name:       cfg.NodeName,
		log:        cfg.Logger.With().Str(keyComponent, "cluster").Logger(),
		delegate:   d,
		retention:  max(mlc.GossipToTheDeadTime, cfg.ReconcileInterval),
		changes:    make(chan struct{}, 1),
		members:    make(map[string]entry),
		metaWarned: make(map[string]bool),
	}
	c.joined.Store(len(cfg.Join) == 0)
	return c, nil
}

// Start creates the memberlist, which binds BindAddr:BindPort and lists
// this node, then starts the reconcile loop and, when Join is set, the
// background join loop. Both run until ctx ends or Shutdown. Start returns
// once the node listens; joining happens later (see Joined).
func (c *Cluster) Start(ctx context.Context) error {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	switch {
	case c.stopped:
		return ErrShutdown
	case c.started:
		return errors.New("cluster: already started")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cluster: start: %w", err)
	}

	c.chooseAdvertise(false)
	ml, err := memberlist.Create(c.memberlistConfig())
	if noPrivateIP(err) && c.chooseAdvertise(true) {
		// A private address memberlist would not take (it wants one with
		// a default route): advertise it anyway, as chosen above.
		c.mu.Lock()
		clear(c.members)
		c.mu.Unlock()
		ml, err = memberlist.Create(c.memberlistConfig())
	}
	if err != nil {
		c.mu.Lock()
		clear(c.members) // memberlist may have reported this node before failing
		c.mu.Unlock()
		if noPrivateIP(err) {
			return fmt.Errorf("cluster: start memberlist on %s:%d: %w; set cluster.advertise-addr (the address other nodes reach this one at) or cluster.enabled=false", c.cfg.BindAddr, c.cfg.BindPort, err)
		}
		return fmt.Errorf("cluster: start memberlist on %s:%d: %w", c.cfg.BindAddr, c.cfg.BindPort, err)
	}
	c.ml, c.started = ml, true

	self, _ := c.member(c.name)
	c.log.Info().Str(keyNode, c.name).Str(keyAddr, hostPort(self)).Str(keyZone, self.Zone).
		Str(keyURL, self.EurekaURL).Bool(keyEncrypted, c.cfg.Memberlist.EncryptionEnabled() || len(c.cfg.SecretKey) > 0).
		Strs(keySeeds, c.cfg.Join).Msg("cluster member started")

	ctx, c.cancel = context.WithCancel(ctx)
	c.wg.Add(1)
	go c.reconcileLoop(ctx)
	if len(c.cfg.Join) > 0 {
		c.wg.Add(1)
		go c.joinLoop(ctx, ml)
	}
	return nil
}

// chooseAdvertise sets the advertise address when memberlist cannot pick
// one (no private IPv4 address), with one warning; failed says memberlist
// already refused, so any usable address, private included, is taken. It
// reports whether it set one.
func (c *Cluster) chooseAdvertise(failed bool) bool {
	if c.cfg.AdvertiseAddr != "" {
		return false
	}
	list := c.cfg.InterfaceAddrs
	if list == nil {
		list = net.InterfaceAddrs
	}
	addrs, err := list()
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot list the host's addresses for gossip's advertise address")
		return false
	}
	ch := ChooseAdvertise(c.cfg.BindAddr, "", addrs)
	if failed {
		ch.Addr, ch.Kind = bestAddr(addrs)
		ch.Needed = true
	}
	if !ch.Needed || ch.Addr == "" {
		return false
	}
	c.cfg.AdvertiseAddr = ch.Addr
	ev := c.log.Warn().Str(keyAddr, ch.Addr).Str(keyKind, ch.Kind.String())
	if !ch.Kind.Reachable() {
		ev.Msg("gossip: the host has no address other hosts can reach; advertising loopback, so only nodes on this host can join (set cluster.advertise-addr)")
	} else {
		ev.Msg("gossip: no private IPv4 address memberlist would advertise; advertising this one instead (set cluster.advertise-addr to choose)")
	}
	return true
}

// memberlistConfig is the base memberlist config with this package's
// fields, delegates and logger filled in.
func (c *Cluster) memberlistConfig() *memberlist.Config {
	mlc := *c.cfg.Memberlist
	mlc.Name = c.cfg.NodeName
	mlc.BindAddr = c.cfg.BindAddr
	mlc.BindPort = c.cfg.BindPort
	mlc.AdvertiseAddr = c.cfg.AdvertiseAddr
	mlc.AdvertisePort = c.cfg.AdvertisePort
	if mlc.AdvertisePort == 0 {
		mlc.AdvertisePort = c.cfg.BindPort // memberlist fills in the port it picks when this is 0 too
	}
	if len(c.cfg.SecretKey) > 0 {
		mlc.SecretKey = slices.Clone(c.cfg.SecretKey)
		// The keyring sends with SecretKey and accepts every key; Validate
		// has checked the lengths, NewKeyring's only failure.
		mlc.Keyring, _ = memberlist.NewKeyring(cloneKeys(c.cfg.SecretKeys), mlc.SecretKey)
	}
	mlc.Delegate = c.delegate
	mlc.Events = &eventDelegate{c: c}
	mlc.Ping = &pingDelegate{c: c}
	mlc.LogOutput = nil // memberlist refuses both LogOutput and Logger
	mlc.Logger = log.New(&memberlistWriter{
		log:       c.log,
		gate:      &c.gate,
		onSuspect: func(name string) { c.suspect(name, time.Now()) },
	}, "", 0)
	return &mlc
}

// Members returns a snapshot of the cluster sorted by name: this node
// (Self) and every peer, including dead and left ones until memberlist
// reaps them (Memberlist.GossipToTheDeadTime) or they rejoin. Before Start
// it is empty; after Shutdown it no longer changes.
func (c *Cluster) Members() []Member {
	c.mu.Lock()
	out := make([]Member, 0, len(c.members))
	for _, e := range c.members {
		out = append(out, e.Member)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (c *Cluster) member(name string) (Member, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.members[name]
	return e.Member, ok
}

// Changes receives a value whenever the Members snapshot may have changed.
// Notifications coalesce: the channel holds at most one, so a slow reader
// gets one value for many changes and must call Members to see the current
// state. It is never closed.
func (c *Cluster) Changes() <-chan struct{} { return c.changes }

// notify never blocks: if a notification is already pending, it covers
// this change too.
func (c *Cluster) notify() {
	select {
	case c.changes <- struct{}{}:
	default:
	}
}

// Shutdown leaves the cluster gracefully, so peers list this node as
// "left" rather than "dead". Within timeout it re-advertises this node's
// metadata with "leaving":true and waits for that update to go out, then
// broadcasts memberlist's leave and waits for it; then it stops memberlist
// and waits for the background loops (an in-flight join attempt can take up
// to Memberlist.TCPTimeout). A timeout of 0 or less does not wait for the
// broadcasts, so peers may see "dead". A broadcast that timed out is
// returned as an error, but the node is shut down all the same. Shutdown is
// idempotent and safe before Start.
func (c *Cluster) Shutdown(timeout time.Duration) error {
	return c.shutdown(true, timeout)
}

// shutdown with leave=false stops memberlist without any leave broadcast,
// as a crash would: peers see this node suspect, then dead.
func (c *Cluster) shutdown(leave bool, timeout time.Duration) error {
	c.lifeMu.Lock()
	defer c.lifeMu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	if c.cancel != nil {
		c.cancel()
	}

	var errs []error
	if c.ml != nil {
		if leave {
			errs = append(errs, c.leave(timeout)...)
		}
		if err := c.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: shutdown memberlist: %w", err))
		}
	}
	c.wg.Wait()

	if c.ml != nil {
		c.log.Info().Str(keyNode, c.name).Bool(keyGraceful, leave).Msg("cluster member stopped")
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.gate.close()
	return errors.Join(errs...)
}

// leave announces the leave intent in this node's metadata, then lets
// memberlist broadcast its leave, both within timeout. A broadcast that
// has nobody to go to is no failure: the last node of a cluster to stop,
// or every node of one stopped at once (the others left while this one
// waited), tells nobody, and says so at debug level.
func (c *Cluster) leave(timeout time.Duration) []error {
	deadline := time.Now().Add(timeout)
	var errs []error
	c.delegate.setLeaving()
	if err := c.broadcast("announce leave", c.ml.UpdateNode, timeout); err != nil {
		errs = append(errs, fmt.Errorf("cluster: announce leave: %w", err))
	}
	if err := c.broadcast("leave", c.ml.Leave, time.Until(deadline)); err != nil {
		errs = append(errs, fmt.Errorf("cluster: leave: %w", err))
	}
	return errs
}

// leavePoll is how often a leave's wait checks whether anyone is left to
// tell.
const leavePoll = 20 * time.Millisecond

// broadcast runs send, one of memberlist's calls that queue a broadcast
// and wait up to a timeout for it to go out (UpdateNode, Leave), and
// returns its error; but when no other member is alive, before or while
// it waits, nobody can hear the broadcast: it returns nil at once,
// logging that at debug level. memberlist itself only looks before
// waiting, and a broadcast whose every receiver has left never goes out.
func (c *Cluster) broadcast(what string, send func(time.Duration) error, timeout time.Duration) error {
	// memberlist waits without limit for a timeout of 0; the smallest
	// positive wait is as close to "do not wait" as it offers.
	const minWait = time.Millisecond
	nobody := func(msg string) error {
		c.log.Debug().Str(keyNode, c.name).Str("step", what).Msg(msg)
		return nil
	}
	if !c.othersAlive() {
		_ = send(minWait) // still marks this node leaving, or left
		return nobody(what + ": no other member is alive, nobody to tell; not waiting for the broadcast")
	}
	// An abandoned sender ends by its timeout. memberlist's Leave panics
	// when called after Shutdown, which an abandoned sender scheduled
	// late could be: nothing is left to do then.
	done := make(chan error, 1)
	go func() {
		defer func() { _ = recover() }()
		done <- send(max(timeout, minWait))
	}()
	tick := time.NewTicker(leavePoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil && !c.othersAlive() {
				return nobody(what + ": every other member left meanwhile, nobody left to tell; the broadcast did not go out")
			}
			return err
		case <-tick.C:
			if !c.othersAlive() {
				return nobody(what + ": every other member left meanwhile, nobody left to tell; not waiting for the broadcast")
			}
		}
	}
}

// othersAlive reports whether memberlist holds another member alive
// (not suspect, dead or left): one that can hear a broadcast.
func (c *Cluster) othersAlive() bool {
	for _, m := range c.ml.Members() {
		if m.Name != c.name && m.State == memberlist.StateAlive {
			return true
		}
	}
	return false
}

// reconcileLoop runs reconcileLocked every ReconcileInterval until ctx
// ends.
func (c *Cluster) reconcileLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			var changes []change
			if !c.closed {
				changes = c.reconcileLocked(now)
			}
			c.mu.Unlock()
			if len(changes) > 0 {
				c.notify()
			}
			for _, ch := range changes {
				c.logTransition(ch)
			}
		}
	}
}

// change is one member's transition in the snapshot.
type change struct {
	prev    Member
	had     bool // prev is valid
	cur     Member
	removed bool // forgotten: cur is unset
}

// reconcileLocked applies what memberlist changes without a callback, as
// of now: dead and left members are forgotten once the retention
// (Memberlist.GossipToTheDeadTime, after which memberlist reaps them) has
// passed, and a suspicion memberlist must have resolved by now without
// declaring the node dead ends (see suspect.go).
func (c *Cluster) reconcileLocked(now time.Time) []change {
	var out []change
	for name, e := range c.members {
		switch {
		case e.State.gone() && now.Sub(e.goneAt) >= c.retention:
			delete(c.members, name)
			delete(c.metaWarned, name)
			out = append(out, change{prev: e.Member, had: true, removed: true})
		case e.State == StateSuspect && !now.Before(e.suspectUntil):
			cur := e.Member
			cur.State = StateAlive
			c.members[name] = entry{Member: cur}
			out = append(out, change{prev: e.Member, had: true, cur: cur})
		}
	}
	return out
}

// logTransition logs one change: peer transitions at Info, this node's
// own and forgotten peers at Debug.
func (c *Cluster) logTransition(ch change) {
	m := ch.cur
	if ch.removed {
		m = ch.prev
	}
	var msg string
	switch {
	case ch.removed:
		msg = "peer forgotten"
	case m.State == StateAlive && (!ch.had || ch.prev.State.gone()):
		msg = "peer joined"
	case m.State == StateLeft:
		msg = "peer left"
	case m.State == StateDead:
		msg = "peer dead"
	case m.State == StateSuspect && ch.prev.State != StateSuspect:
		msg = "peer suspect"
	case m.State == StateAlive && ch.prev.State == StateSuspect:
		msg = "peer alive again"
	default:
		msg = "peer updated"
	}
	level := zerolog.InfoLevel
	if m.Self || ch.removed {
		level = zerolog.DebugLevel
	}
	if m.Self {
		msg = strings.Replace(msg, "peer", "local node", 1)
	}
	c.gate.do(func() {
		ev := c.log.WithLevel(level).Str(keyPeer, m.Name).Str(keyZone, m.Zone).Str(keyURL, m.EurekaURL).
			Str(keyAddr, hostPort(m)).Str(keyState, string(m.State))
		if ch.had {
			ev = ev.Str(keyPrevState, string(ch.prev.State))
		}
		ev.Msg(msg)
	})
}

func cloneKeys(keys [][]byte) [][]byte {
	if keys == nil {
		return nil
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = slices.Clone(k)
	}
	return out
}
