package replicationtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/replication"
)

// ErrTimeout is what Send returns for a batch the Network delayed: the
// sender saw no answer in time and will retry, while the batch itself is
// still on its way and lands later (a stale copy arriving after newer
// ones). Like ErrUnreachable it is a network error to the sender.
var ErrTimeout = errors.New("replicationtest: no answer in time (batch delayed)")

// Faults are the probabilities, per batch, of what the Network does to
// replication traffic on a link that is up. They are drawn from the
// Network's seeded source in a fixed order, so a seed replays a run.
type Faults struct {
	// Drop loses the request: nothing is applied, the sender retries.
	Drop float64
	// Delay holds the request for up to MaxDelay of the cluster's clock;
	// the sender gets ErrTimeout and retries, and the held copy is applied
	// when the clock passes its time, after the retry.
	Delay    float64
	MaxDelay time.Duration
	// Duplicate applies the request twice (a retry of a lost answer).
	Duplicate float64
	// Reorder shuffles the items of the batch before they are applied;
	// the answers are put back in the sender's order.
	Reorder float64
}

// NetworkStats counts what the Network did.
type NetworkStats struct {
	Delivered, Dropped, Delayed, Duplicated, Reordered, Unreachable, Fetches uint64
	// AntiEntropy counts anti-entropy requests answered; AntiEntropyBytes
	// their request and answer bodies.
	AntiEntropy, AntiEntropyBytes uint64
}

// Network is an in-memory network between the nodes of a Cluster: each
// node's replication Transport (From) delivers batches to the receiving
// node's replication.Receiver synchronously, as encoded wire bytes, and
// fetches registries for syncUp from the node's registry. Links can be cut
// one way (Cut), in groups (Partition) and healed; Faults add loss, delay,
// duplication and reordering. Everything random comes from one seeded
// source, so a seed reproduces a run. Safe for concurrent use, though a
// Cluster drives it from one goroutine.
type Network struct {
	clock *registrytest.Clock

	// mu guards everything below.
	mu        sync.Mutex
	rand      *rand.Rand
	faults    Faults
	receivers map[string]*replication.Receiver
	stores    map[string]*registry.Registry
	cut       map[[2]string]bool // from, to
	delayed   []delayedBatch
	stats     NetworkStats
	// onFetch runs once a registry copy for syncUp has been taken and
	// before the fetching node applies it: the place to make changes that
	// race the copy.
	onFetch func(from, to string)
	// fail holds, per link, HTTP statuses to answer the next batches with
	// (FailNext).
	fail map[[2]string][]int
}

type delayedBatch struct {
	due      time.Time
	seq      int // order among batches due at the same time
	from, to string
	body     []byte
}

// NewNetwork returns a network on clock whose random choices come from
// seed.
func NewNetwork(clock *registrytest.Clock, seed uint64) *Network {
	return &Network{
		clock:     clock,
		rand:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		receivers: map[string]*replication.Receiver{},
		stores:    map[string]*registry.Registry{},
		cut:       map[[2]string]bool{},
	}
}

// attach puts a node on the network; detach takes it off (a stopped
// node: everything sent to it is unreachable).
func (n *Network) attach(name string, rc *replication.Receiver, reg *registry.Registry) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.receivers[name], n.stores[name] = rc, reg
}

func (n *Network) detach(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.receivers, name)
	delete(n.stores, name)
}

// SetFaults sets the fault probabilities for every link.
func (n *Network) SetFaults(f Faults) {
	n.mu.Lock()
	n.faults = f
	n.mu.Unlock()
}

// OnFetch sets a function run after a syncUp copy is taken from `to` and
// before `from` applies it (nil for none).
func (n *Network) OnFetch(f func(from, to string)) {
	n.mu.Lock()
	n.onFetch = f
	n.mu.Unlock()
}

// FailNext makes the next batch from one node to another get HTTP code
// (a *replication.StatusError) without being applied, as a proxy or a
// peer's bug would answer; calls queue up.
func (n *Network) FailNext(from, to string, code int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail == nil {
		n.fail = map[[2]string][]int{}
	}
	k := [2]string{from, to}
	n.fail[k] = append(n.fail[k], code)
}

// Cut cuts the link from one node to another, one way.
func (n *Network) Cut(from, to string) {
	n.mu.Lock()
	n.cut[[2]string{from, to}] = true
	n.mu.Unlock()
}

// Partition cuts every link between nodes of different groups; nodes not
// named keep all their links. Links within a group stay as they are.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	group := map[string]int{}
	for i, g := range groups {
		for _, name := range g {
			group[name] = i
		}
	}
	for a, ga := range group {
		for b, gb := range group {
			if ga != gb {
				n.cut[[2]string{a, b}] = true
			}
		}
	}
}

// Heal restores every link. Delayed batches stay on their way.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.cut)
	n.mu.Unlock()
}

// Reachable reports whether from can reach to now.
func (n *Network) Reachable(from, to string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.reachableLocked(from, to)
}

func (n *Network) reachableLocked(from, to string) bool {
	_, up := n.receivers[to]
	return up && !n.cut[[2]string{from, to}]
}

// Stats returns what the network did so far.
func (n *Network) Stats() NetworkStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Pending is the number of delayed batches still on their way.
func (n *Network) Pending() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.delayed)
}

// From returns node from's Transport: peers are named by Peer.Name.
func (n *Network) From(from string) replication.Transport { return &link{net: n, from: from} }

// DeliverDue applies every delayed batch whose time has come, in due
// order, to nodes that are up and reachable then (others lose it). It
// reports how many were applied.
func (n *Network) DeliverDue() int {
	now := n.clock.Now()
	n.mu.Lock()
	slices.SortFunc(n.delayed, func(a, b delayedBatch) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	var due []delayedBatch
	keep := n.delayed[:0]
	for _, d := range n.delayed {
		if d.due.After(now) {
			keep = append(keep, d)
		} else {
			due = append(due, d)
		}
	}
	n.delayed = keep
	n.mu.Unlock()
	applied := 0
	for _, d := range due {
		n.mu.Lock()
		rc := n.receivers[d.to]
		ok := rc != nil && n.reachableLocked(d.from, d.to)
		n.mu.Unlock()
		if ok {
			_, _ = rc.Handle(d.body)
			applied++
		}
	}
	return applied
}

// NextDue is when the first delayed batch lands; false when none is held.
func (n *Network) NextDue() (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first time.Time
	for _, d := range n.delayed {
		if first.IsZero() || d.due.Before(first) {
			first = d.due
		}
	}
	return first, !first.IsZero()
}

// link is one node's view of the network.
type link struct {
	net  *Network
	from string
}

// Send implements replication.Transport.
func (l *link) Send(ctx context.Context, p replication.Peer, b replication.Batch) (replication.BatchResult, error) {
	if err := ctx.Err(); err != nil {
		return replication.BatchResult{}, err
	}
	n := l.net
	n.mu.Lock()
	if !n.reachableLocked(l.from, p.Name) {
		n.stats.Unreachable++
		n.mu.Unlock()
		return replication.BatchResult{}, ErrUnreachable
	}
	rc := n.receivers[p.Name]
	if codes := n.fail[[2]string{l.from, p.Name}]; len(codes) > 0 {
		n.fail[[2]string{l.from, p.Name}] = codes[1:]
		n.mu.Unlock()
		return replication.BatchResult{}, &replication.StatusError{Code: codes[0]}
	}
	f := n.faults
	// Always draw all four, so one fault's probability does not shift the
	// draws of the others.
	drop, delay, dup, reorder := n.rand.Float64(), n.rand.Float64(), n.rand.Float64(), n.rand.Float64()
	order := make([]int, len(b.Tasks))
	for i := range order {
		order[i] = i
	}
	if reorder < f.Reorder && len(order) > 1 {
		n.rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		n.stats.Reordered++
	}
	var wait time.Duration
	if f.MaxDelay > 0 {
		wait = time.Duration(n.rand.Int64N(int64(f.MaxDelay))) + 1
	}
	n.mu.Unlock()

	shuffled := replication.Batch{Tasks: make([]replication.Task, len(order)), Versioned: b.Versioned}
	for i, j := range order {
		shuffled.Tasks[i] = b.Tasks[j]
	}
	body, err := replication.EncodeBatch(shuffled)
	if err != nil {
		return replication.BatchResult{}, fmt.Errorf("encode batch: %w", err)
	}
	switch {
	case drop < f.Drop:
		n.count(func(s *NetworkStats) { s.Dropped++ })
		return replication.BatchResult{}, ErrUnreachable
	case delay < f.Delay && wait > 0:
		n.mu.Lock()
		n.delayed = append(n.delayed, delayedBatch{due: n.clock.Now().Add(wait), seq: int(n.stats.Delayed), from: l.from, to: p.Name, body: body})
		n.stats.Delayed++
		n.mu.Unlock()
		return replication.BatchResult{}, ErrTimeout
	}
	resp, err := rc.Handle(body)
	if err != nil {
		return replication.BatchResult{}, &replication.StatusError{Code: 400}
	}
	if dup < f.Duplicate {
		if resp, err = rc.Handle(body); err != nil {
			return replication.BatchResult{}, &replication.StatusError{Code: 400}
		}
		n.count(func(s *NetworkStats) { s.Duplicated++ })
	}
	n.count(func(s *NetworkStats) { s.Delivered++ })
	res, err := replication.DecodeBatchResponse(resp)
	if err != nil {
		return replication.BatchResult{}, &replication.StatusError{Code: 502}
	}
	if len(res.Items) == len(order) {
		items := make([]wire.ItemResult, len(order))
		for i, j := range order {
			items[j] = res.Items[i]
		}
		res.Items = items
	}
	return res, nil
}

// FetchRegistry implements replication.Transport: a copy of every
// instance the peer holds, as a peer's GET /apps would give it (without
// write versions: the syncer asks for them through Digest).
func (l *link) FetchRegistry(ctx context.Context, p replication.Peer) ([]*registry.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := l.net
	n.mu.Lock()
	if !n.reachableLocked(l.from, p.Name) {
		n.stats.Unreachable++
		n.mu.Unlock()
		return nil, ErrUnreachable
	}
	reg := n.stores[p.Name]
	onFetch := n.onFetch
	n.stats.Fetches++
	n.mu.Unlock()
	if !reg.Opened() {
		return nil, fmt.Errorf("fetch from %s: %w", p.Name, replication.ErrPeerStarting)
	}
	var out []*registry.Instance
	for _, app := range reg.Snapshot().Apps {
		for _, iv := range app.Instances {
			c := iv.Instance.Clone()
			c.WriteVersion = 0 // GET /apps is Eureka's wire: no versions
			out = append(out, c)
		}
	}
	if onFetch != nil {
		onFetch(l.from, p.Name)
	}
	return out, nil
}

// antiEntropy is the common part of the anti-entropy calls: the peer's
// registry if the link is up and the request not dropped (Faults.Drop
// applies to them as to batches; Cut and Partition too).
func (l *link) antiEntropy(ctx context.Context, p replication.Peer) (*registry.Registry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := l.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.reachableLocked(l.from, p.Name) {
		n.stats.Unreachable++
		return nil, ErrUnreachable
	}
	if n.rand.Float64() < n.faults.Drop {
		n.stats.Dropped++
		return nil, ErrUnreachable
	}
	n.stats.AntiEntropy++
	return n.stores[p.Name], nil
}

// Digest implements replication.Transport, through the wire encoding.
func (l *link) Digest(ctx context.Context, p replication.Peer, req wire.DigestRequest) (wire.DigestReply, error) {
	reg, err := l.antiEntropy(ctx, p)
	if err != nil {
		return wire.DigestReply{}, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return wire.DigestReply{}, err
	}
	resp, err := replication.AnswerDigest(reg, body)
	if err != nil {
		return wire.DigestReply{}, &replication.StatusError{Code: 400}
	}
	l.net.count(func(s *NetworkStats) { s.AntiEntropyBytes += uint64(len(body) + len(resp)) })
	var reply wire.DigestReply
	if err := json.Unmarshal(resp, &reply); err != nil {
		return wire.DigestReply{}, err
	}
	return reply, nil
}

// Copies implements replication.Transport, through the wire encoding.
func (l *link) Copies(ctx context.Context, p replication.Peer, keys []registry.InstanceKey) ([]registry.VersionedCopy, error) {
	reg, err := l.antiEntropy(ctx, p)
	if err != nil {
		return nil, err
	}
	body, err := replication.EncodeCopiesRequest(keys)
	if err != nil {
		return nil, err
	}
	resp, err := replication.AnswerCopies(reg, body)
	if err != nil {
		return nil, &replication.StatusError{Code: 400}
	}
	l.net.count(func(s *NetworkStats) { s.AntiEntropyBytes += uint64(len(body) + len(resp)) })
	return replication.DecodeCopies(resp)
}

func (n *Network) count(f func(*NetworkStats)) {
	n.mu.Lock()
	f(&n.stats)
	n.mu.Unlock()
}
