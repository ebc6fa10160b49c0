package replicationtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
)

// Cluster is N nodes in one process, in the spirit of hashicorp/raft's
// testing.go: each node has a real registry, replicator, receiver and
// syncer, all on one manual clock, connected by an in-memory Network that
// can partition, heal, drop, delay, duplicate and reorder replication. No
// goroutines, sockets or sleeps: the test drives replication with Settle
// (or Flush) and time with Advance, and a seed replays a run exactly.
//
// Membership is the test's: every node peers with every other node that
// was started (FullyConnect), as a cluster whose memberlist has converged.
type Cluster struct {
	tb    testing.TB
	Clock *registrytest.Clock
	Net   *Network
	cfg   ClusterConfig

	nodes map[string]*Node
	names []string // in start order
	skew  map[string]time.Duration
}

// ClusterConfig changes the nodes' configurations.
type ClusterConfig struct {
	// Seed drives every random choice: the network's faults and the
	// registries' eviction picks.
	Seed uint64
	// Registry and Replication adjust each node's configs (after the
	// cluster's own settings: manual clock, big inboxes).
	Registry    func(*registry.Config)
	Replication func(*replication.Config)
	// Logger, when set, receives every node's logs (tests pass a
	// zerolog.NewTestWriter logger); the zero value logs nothing.
	Logger zerolog.Logger
	// AntiEntropy makes every node run an anti-entropy round with each
	// peer that joins or comes back, as cmd/muster does (rounds on the
	// interval are the test's: AntiEntropyRound). Off, anti-entropy runs
	// only when the test asks.
	AntiEntropy bool
}

// Node is one member of a Cluster.
type Node struct {
	Name     string
	Reg      *registry.Registry
	Rep      *replication.Replicator
	Receiver *replication.Receiver
	AE       *replication.AntiEntropy
	// Sync is what the node's syncUp did when it started.
	Sync replication.SyncResult
}

// NewCluster starts nodes with the given names. The first opens with an
// empty registry; each later one syncs up from those before it, as nodes
// joining one after the other do.
func NewCluster(tb testing.TB, cfg ClusterConfig, names ...string) *Cluster {
	tb.Helper()
	clk := registrytest.NewClock()
	c := &Cluster{tb: tb, Clock: clk, Net: NewNetwork(clk, cfg.Seed), cfg: cfg, nodes: map[string]*Node{}, skew: map[string]time.Duration{}}
	for _, name := range names {
		c.Start(name)
	}
	return c
}

// Node returns the named node; nil when it is stopped or unknown.
func (c *Cluster) Node(name string) *Node { return c.nodes[name] }

// Names lists the running nodes, in start order.
func (c *Cluster) Names() []string {
	var out []string
	for _, n := range c.names {
		if c.nodes[n] != nil {
			out = append(out, n)
		}
	}
	return out
}

// Start starts a node (again, after Stop: a restart with an empty
// registry), as a real node does: it joins the membership first, so every
// running node takes it as a peer (their new senders catch it up, and
// replicate to it while it copies), then it syncs up from them through the
// network and opens for traffic.
func (c *Cluster) Start(name string) *Node {
	c.tb.Helper()
	return c.start(name, true, nil)
}

// StartWith is Start with beforeOpen run after syncUp and before the node
// opens for traffic: where cmd/muster loads its data dir's snapshot when
// no peer had the registry (the test's beforeOpen decides, from n.Sync).
func (c *Cluster) StartWith(name string, beforeOpen func(n *Node)) *Node {
	c.tb.Helper()
	return c.start(name, true, beforeOpen)
}

// Join starts a node that syncs up from the running nodes and opens for
// traffic, but that the others do not know yet: as when memberlist has not
// told every node about it. FullyConnect ends that.
func (c *Cluster) Join(name string) *Node {
	c.tb.Helper()
	return c.start(name, false, nil)
}

func (c *Cluster) start(name string, connect bool, beforeOpen func(*Node)) *Node {
	c.tb.Helper()
	if c.nodes[name] != nil {
		c.tb.Fatalf("replicationtest: node %s is already running", name)
	}
	log := c.cfg.Logger.With().Str("node", name).Logger()
	now := func() time.Time { return c.Clock.Now().Add(c.skew[name]) }
	rcfg := registry.DefaultConfig()
	rcfg.Now = now
	rcfg.Rand = rand.New(rand.NewPCG(c.cfg.Seed, uint64(len(c.names))))
	rcfg.Logger = log
	if c.cfg.Registry != nil {
		c.cfg.Registry(&rcfg)
	}
	reg, err := registry.New(rcfg)
	if err != nil {
		c.tb.Fatal(err)
	}
	pcfg := replication.DefaultConfig()
	pcfg.Now = now
	pcfg.Transport = c.Net.From(name)
	pcfg.Store = reg
	pcfg.InboxSize = 1 << 16
	pcfg.SendTimeout = 0
	pcfg.Logger = log
	if c.cfg.Replication != nil {
		c.cfg.Replication(&pcfg)
	}
	rep, err := replication.New(pcfg)
	if err != nil {
		c.tb.Fatal(err)
	}
	rc, err := replication.NewReceiver(reg, log)
	if err != nil {
		c.tb.Fatal(err)
	}
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: reg, Transport: pcfg.Transport, Peers: rep.PeerList,
		Now: now, Rand: rand.New(rand.NewPCG(c.cfg.Seed, 7)), Logger: log,
		OnMuster: rep.MarkMuster,
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	if c.cfg.AntiEntropy {
		reg.SetTombstoneHold(ae.TombstoneHold)
	}
	n := &Node{Name: name, Reg: reg, Rep: rep, Receiver: rc, AE: ae}
	if !slices.Contains(c.names, name) {
		c.names = append(c.names, name)
	}
	c.nodes[name] = n
	c.Net.attach(name, rc, reg)
	rep.SetPeers(c.peersOf(name))
	if connect {
		c.FullyConnect()
	}

	syncer, err := replication.NewSyncer(replication.SyncConfig{
		Store:         reg,
		Transport:     pcfg.Transport,
		Candidates:    func() []replication.Peer { return c.peersOf(name) },
		PeersExpected: len(c.Names()) > 1,
		Attempts:      1,
		After:         func(time.Duration) <-chan time.Time { ch := make(chan time.Time, 1); ch <- c.Clock.Now(); return ch },
		Logger:        log,
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	n.Sync = syncer.Run(context.Background())
	if beforeOpen != nil {
		beforeOpen(n)
	}
	reg.OpenForTraffic()
	return n
}

// Stop takes a node off the network and, once memberlist would have
// declared it dead, out of the others' peer lists.
func (c *Cluster) Stop(name string) {
	if c.nodes[name] == nil {
		return
	}
	c.Net.detach(name)
	c.nodes[name] = nil
	c.FullyConnect()
}

// peersOf is every running node but self: the peer list of a cluster whose
// membership has converged.
func (c *Cluster) peersOf(self string) []replication.Peer {
	var out []replication.Peer
	for _, n := range c.Names() {
		if n != self {
			out = append(out, replication.Peer{Name: n, URL: "mem://" + n + "/eureka/", Zone: "default", Muster: true})
		}
	}
	return out
}

// FullyConnect gives every running node every other node as a peer. With
// ClusterConfig.AntiEntropy, each node then runs a round with every peer
// that is new to it.
func (c *Cluster) FullyConnect() {
	for _, name := range c.Names() {
		c.nodes[name].Rep.SetPeers(c.peersOf(name))
	}
	if c.cfg.AntiEntropy {
		for _, name := range c.Names() {
			if n := c.nodes[name]; n.Reg.Opened() {
				n.AE.RoundNewPeers(context.Background())
			}
		}
	}
}

// SetPeers replaces one node's peer list, as memberlist does when it
// declares a peer dead or alive; with ClusterConfig.AntiEntropy the node
// then runs a round with each peer new to it (one that came back too).
func (c *Cluster) SetPeers(node string, peers []replication.Peer) {
	n := c.nodes[node]
	n.Rep.SetPeers(peers)
	if c.cfg.AntiEntropy && n.Reg.Opened() {
		n.AE.RoundNewPeers(context.Background())
	}
}

// PeersExcept is the peer list of node in a converged membership, without
// the nodes named in except: what memberlist gives when it declares them
// dead.
func (c *Cluster) PeersExcept(node string, except ...string) []replication.Peer {
	var out []replication.Peer
	for _, p := range c.peersOf(node) {
		if !slices.Contains(except, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// SetSkew sets how far the named node's clock is off the cluster's (its
// registry's and replicator's clock; the network keeps the cluster's).
func (c *Cluster) SetSkew(name string, d time.Duration) { c.skew[name] = d }

// AntiEntropyRound runs one anti-entropy round on every running node, in
// start order, with each of its peers, and returns what they did.
func (c *Cluster) AntiEntropyRound() []replication.RoundResult {
	var out []replication.RoundResult
	for _, name := range c.Names() {
		for _, r := range c.nodes[name].AE.RoundAll(context.Background()) {
			r.Peer = name + "←" + r.Peer
			out = append(out, r)
		}
	}
	return out
}

// InSync reports whether every running node has the same root digest:
// the same instances at the same write versions.
func (c *Cluster) InSync() bool {
	names := c.Names()
	for _, name := range names[1:] {
		if c.nodes[name].Reg.RootDigest() != c.nodes[names[0]].Reg.RootDigest() {
			return false
		}
	}
	return true
}

// Apply applies a client's operation on the named node, as its HTTP API
// would.
func (c *Cluster) Apply(node string, op registry.Op) (*registry.Instance, error) {
	c.tb.Helper()
	n := c.nodes[node]
	if n == nil {
		c.tb.Fatalf("replicationtest: node %s is not running", node)
	}
	return n.Reg.Apply(op)
}

// MustApply is Apply that fails the test on an error.
func (c *Cluster) MustApply(node string, op registry.Op) *registry.Instance {
	c.tb.Helper()
	in, err := c.Apply(node, op)
	if err != nil {
		c.tb.Fatalf("%s on %s: %s %s/%s: %v", op.Origin, node, op.Kind, op.App, op.ID, err)
	}
	return in
}

// Flush runs one round: delayed batches that are due land, then every
// running node, in start order, sends what it may at the current time. It
// reports whether anything moved.
func (c *Cluster) Flush() bool {
	moved := c.Net.DeliverDue() > 0
	for _, name := range c.Names() {
		sent, err := c.nodes[name].Rep.Flush(context.Background())
		if err != nil {
			c.tb.Fatal(err)
		}
		moved = moved || sent > 0
	}
	return moved
}

// Settle replicates until nothing is left to send to a reachable node and
// no delayed batch is on its way, moving the clock in small steps over
// backoffs and delays. It fails the test if that takes more than limit of
// clock time. It returns how much time passed.
func (c *Cluster) Settle(limit time.Duration) time.Duration {
	c.tb.Helper()
	start := c.Clock.Now()
	for {
		if c.Flush() {
			continue
		}
		if !c.busy() {
			return c.Clock.Now().Sub(start)
		}
		if c.Clock.Now().Sub(start) >= limit {
			c.tb.Fatalf("replicationtest: cluster did not settle within %s: %s", limit, c.describeBusy())
		}
		c.Clock.Advance(50 * time.Millisecond)
	}
}

// busy reports work left: tasks queued for a reachable peer, or delayed
// batches.
func (c *Cluster) busy() bool {
	if c.Net.Pending() > 0 {
		return true
	}
	for _, name := range c.Names() {
		for _, ps := range c.nodes[name].Rep.Peers() {
			if ps.QueueDepth+ps.InFlight > 0 && c.Net.Reachable(name, ps.Name) {
				return true
			}
		}
	}
	return false
}

func (c *Cluster) describeBusy() string {
	var parts []string
	for _, name := range c.Names() {
		for _, ps := range c.nodes[name].Rep.Peers() {
			if ps.QueueDepth > 0 {
				parts = append(parts, fmt.Sprintf("%s→%s %d queued (%s)", name, ps.Name, ps.QueueDepth, ps.LastError))
			}
		}
	}
	return fmt.Sprintf("%d delayed; %s", c.Net.Pending(), strings.Join(parts, ", "))
}

// Advance moves the clock by d in steps of at most step, flushing after
// each step, so delayed batches land and backoffs run out on the way.
func (c *Cluster) Advance(d, step time.Duration) {
	for d > 0 {
		s := min(d, step)
		c.Clock.Advance(s)
		d -= s
		for c.Flush() {
		}
	}
}

// Heartbeats renews keys on node, as their clients would.
func (c *Cluster) Heartbeats(node string, keys []registry.InstanceKey) {
	c.tb.Helper()
	for _, k := range keys {
		c.MustApply(node, registry.RenewOp(k.App, k.ID))
	}
}

// nodeLocal lists the instance fields each node stamps for itself when it
// stores a copy; they legitimately differ between nodes.
var nodeLocal = map[string]bool{
	"LastUpdatedTimestamp":  true,
	"ActionType":            true,
	"RegistrationTimestamp": true,
	"ServiceUpTimestamp":    true,
	"EvictionTimestamp":     true,
}

// Diff compares two registries field by field and lists every difference
// a client could see: instances present on one side only, and every
// instance field but the node-local timestamps and action type, which each
// node stamps when it stores its copy. It also compares the apps hashcode.
func Diff(a, b *registry.Registry) []string {
	sa, sb := a.Snapshot(), b.Snapshot()
	var out []string
	if sa.Hashcode != sb.Hashcode {
		out = append(out, fmt.Sprintf("apps hashcode %q ≠ %q", sa.Hashcode, sb.Hashcode))
	}
	index := func(s *registry.Snapshot) map[registry.InstanceKey]*registry.Instance {
		m := map[registry.InstanceKey]*registry.Instance{}
		for _, app := range s.Apps {
			for _, iv := range app.Instances {
				m[registry.InstanceKey{App: app.Name, ID: iv.ID()}] = iv.Instance
			}
		}
		return m
	}
	ia, ib := index(sa), index(sb)
	var keys []registry.InstanceKey
	for k := range ia {
		keys = append(keys, k)
	}
	for k := range ib {
		if _, ok := ia[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y registry.InstanceKey) int { return strings.Compare(x.String(), y.String()) })
	for _, k := range keys {
		x, y := ia[k], ib[k]
		switch {
		case x == nil:
			out = append(out, fmt.Sprintf("%s: missing on the first, %s on the second", k, y.Status))
			continue
		case y == nil:
			out = append(out, fmt.Sprintf("%s: %s on the first, missing on the second", k, x.Status))
			continue
		}
		vx, vy := reflect.ValueOf(wireDefaults(*x)), reflect.ValueOf(wireDefaults(*y))
		for i := range vx.NumField() {
			name := vx.Type().Field(i).Name
			if nodeLocal[name] {
				continue
			}
			if fx, fy := vx.Field(i).Interface(), vy.Field(i).Interface(); !reflect.DeepEqual(fx, fy) {
				out = append(out, fmt.Sprintf("%s.%s: %v ≠ %v", k, name, fx, fy))
			}
		}
	}
	return out
}

// wireDefaults fills in what the wire writes for a missing leaseInfo
// (registry/wire: 30 s and 90 s): a copy that travelled holds the numbers,
// the original 0, and clients see the same either way.
func wireDefaults(in registry.Instance) registry.Instance {
	if in.RenewalIntervalSecs == 0 {
		in.RenewalIntervalSecs = 30
	}
	if in.LeaseDurationSecs == 0 {
		in.LeaseDurationSecs = 90
	}
	return in
}

// EnsureSame fails the test unless every running node holds the same
// registry as the first, field by field (Diff).
func (c *Cluster) EnsureSame(tb testing.TB) {
	tb.Helper()
	names := c.Names()
	for _, name := range names[1:] {
		if d := Diff(c.nodes[names[0]].Reg, c.nodes[name].Reg); len(d) > 0 {
			if len(d) > 10 {
				d = append(d[:10], fmt.Sprintf("… %d more", len(d)-10))
			}
			tb.Fatalf("%s and %s differ:\n  %s", names[0], name, strings.Join(d, "\n  "))
		}
	}
}
