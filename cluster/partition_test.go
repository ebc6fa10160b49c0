package cluster_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/internal/testwait"
)

// filterTransport is memberlist's own NetTransport with a switch that drops
// everything this node sends to blocked addresses, as a network partition
// would. Blocking each side's outgoing traffic to the other cuts both ways.
type filterTransport struct {
	*memberlist.NetTransport
	mu      sync.Mutex      // guards blocked
	blocked map[string]bool // host:port
}

func newFilterTransport(t *testing.T) *filterTransport {
	t.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: 0})
	if err != nil {
		t.Fatal(err)
	}
	return &filterTransport{NetTransport: nt, blocked: map[string]bool{}}
}

func (f *filterTransport) setBlocked(addr string, blocked bool) {
	f.mu.Lock()
	f.blocked[addr] = blocked
	f.mu.Unlock()
}

func (f *filterTransport) isBlocked(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked[addr]
}

func (f *filterTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if f.isBlocked(addr) {
		return time.Now(), nil // lost on the way
	}
	return f.NetTransport.WriteTo(b, addr)
}

func (f *filterTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if f.isBlocked(addr) {
		return nil, fmt.Errorf("dial %s: partitioned", addr)
	}
	return f.NetTransport.DialTimeout(addr, timeout)
}

// memberlist prefers the address-aware methods when a transport has them.

func (f *filterTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return f.WriteTo(b, a.Addr)
}

func (f *filterTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return f.DialTimeout(a.Addr, timeout)
}

func (f *filterTransport) addr() string {
	return fmt.Sprintf("127.0.0.1:%d", f.GetAutoBindPort())
}

func withTransport(tr memberlist.Transport) func(*cluster.Config) {
	return func(c *cluster.Config) { c.Memberlist.Transport = tr }
}

// A partition that outlasts memberlist's memory of dead nodes (it reaps them
// and never calls them again) must still heal: the rejoin loop joins the
// seeds again.
func TestCluster_Rejoin_afterLongPartition(t *testing.T) {
	ta, tb := newFilterTransport(t), newFilterTransport(t)
	fast := func(c *cluster.Config) {
		withFastFailureDetection(c)
		c.Memberlist.GossipToTheDeadTime = 500 * time.Millisecond
		c.RejoinInterval = 200 * time.Millisecond
	}
	a := mustStart(t, testConfig(t, "a", fast, withTransport(ta)))
	b := mustStart(t, testConfig(t, "b", fast, withTransport(tb), withJoin(ta.addr())))
	testwait.For(t, converge, "gossip to converge", func() error { return allAlive(a, b) })

	ta.setBlocked(tb.addr(), true)
	tb.setBlocked(ta.addr(), true)
	gone := func(c *cluster.Cluster, name string) error {
		if m, ok := member(c, name); ok && m.State != cluster.StateDead {
			return fmt.Errorf("%s still lists %s as %s", c.LocalName(), name, m.State)
		}
		return nil
	}
	testwait.For(t, converge, "gossip to converge", func() error {
		if err := gone(a, "b"); err != nil {
			return err
		}
		return gone(b, "a")
	})
	// Stay cut off until both have forgotten each other.
	testwait.For(t, converge, "gossip to converge", func() error {
		if _, ok := member(a, "b"); ok {
			return fmt.Errorf("a still remembers b")
		}
		if _, ok := member(b, "a"); ok {
			return fmt.Errorf("b still remembers a")
		}
		return nil
	})

	ta.setBlocked(tb.addr(), false)
	tb.setBlocked(ta.addr(), false)
	testwait.For(t, converge, "gossip to converge", func() error { return allAlive(a, b) })
}
