package cluster

import (
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// eventDelegate is memberlist's EventDelegate: it turns join, leave and
// update events into the member snapshot. memberlist calls it with its node
// lock held, which is the only time the *memberlist.Node fields may be read
// safely (hashicorp/memberlist#250), so each call copies what it needs at
// once. No method blocks: each updates the snapshot under c.mu, releases
// it, then notifies without blocking and logs.
//
// n.State is no help here: memberlist v0.7.0 keeps a node's real state in
// an unexported field that shadows Node.State, which therefore always reads
// StateAlive (hashicorp/memberlist#266, #293). Each callback knows the state
// it reports instead.
type eventDelegate struct {
	c *Cluster
}

// NotifyJoin records a new node, or one that came back from dead or left,
// as alive. memberlist also calls it for this node while Start runs.
func (d *eventDelegate) NotifyJoin(n *memberlist.Node) { d.c.observe(n, StateAlive, time.Now()) }

// NotifyLeave records a node as "left" when it announced its departure or
// "dead" when failure detection gave up on it. A node that shuts down
// gracefully re-advertises its metadata with "leaving":true just before
// memberlist's leave broadcast, and n.Meta still holds that metadata here;
// a crashed node never sent it.
func (d *eventDelegate) NotifyLeave(n *memberlist.Node) {
	state := StateDead
	if meta, err := decodeMeta(n.Meta); err == nil && meta.Leaving {
		state = StateLeft
	}
	d.c.observe(n, state, time.Now())
}

// NotifyUpdate records a node's new metadata or address. memberlist calls
// it only after accepting an alive message, so the node is alive.
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) { d.c.observe(n, StateAlive, time.Now()) }

// observe copies n into the snapshot in the given state. It must run
// inside a memberlist callback (see eventDelegate).
func (c *Cluster) observe(n *memberlist.Node, state State, now time.Time) {
	meta, metaErr := decodeMeta(n.Meta)
	m := Member{
		Name:      n.Name,
		Addr:      n.Addr.String(),
		Port:      int(n.Port),
		Zone:      meta.Zone,
		EurekaURL: meta.URL,
		State:     state,
		Self:      n.Name == c.name,
	}

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	prev, had := c.members[m.Name]
	c.members[m.Name] = nextEntry(prev, had, m, now)
	warnMeta := false
	if metaErr != nil {
		warnMeta = !c.metaWarned[m.Name]
		c.metaWarned[m.Name] = true
	} else {
		delete(c.metaWarned, m.Name)
	}
	c.mu.Unlock()

	if !had || prev.Member != m {
		c.notify()
		c.logTransition(change{prev: prev.Member, had: had, cur: m})
	}
	if warnMeta {
		c.gate.do(func() {
			c.log.Warn().Str(keyPeer, m.Name).Str(keyAddr, hostPort(m)).Err(metaErr).
				Msg("peer sent unparsable node metadata; listing it without a Eureka URL")
		})
	}
}

// nextEntry is the snapshot entry for m, keeping the time a member went
// dead or left across repeated leave events.
func nextEntry(prev entry, had bool, m Member, now time.Time) entry {
	e := entry{Member: m}
	if m.State.gone() {
		e.goneAt = now
		if had && prev.State.gone() {
			e.goneAt = prev.goneAt
		}
	}
	return e
}

func hostPort(m Member) string {
	return net.JoinHostPort(m.Addr, strconv.Itoa(m.Port))
}
