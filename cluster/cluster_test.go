package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
)

// These tests run real memberlists on loopback (127.0.0.1, free ports) with
// memberlist.DefaultLocalConfig timings, plus one on memberlist.MockNetwork.
// They poll with testwait.For; nothing sleeps.

const converge = 10 * time.Second // generous: -race on a loaded 2-core machine

func urlOf(name string) string  { return "http://" + name + ".test:8761/eureka/" }
func zoneOf(name string) string { return "zone-" + name }

// testConfig is a loopback config for node name with fast timings; opts
// adjust it.
func testConfig(t *testing.T, name string, opts ...func(*cluster.Config)) cluster.Config {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.NodeName = name
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = 0
	cfg.Zone = zoneOf(name)
	cfg.EurekaURL = urlOf(name)
	cfg.JoinRetryInterval = 50 * time.Millisecond
	cfg.JoinRetryMaxInterval = 200 * time.Millisecond
	cfg.ReconcileInterval = 25 * time.Millisecond
	cfg.Memberlist = memberlist.DefaultLocalConfig()
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).With().Str("test_node", name).Logger()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

func withJoin(seeds ...string) func(*cluster.Config) {
	return func(c *cluster.Config) { c.Join = seeds }
}

// withLogs also writes the node's log to buf.
func withLogs(t *testing.T, buf *testlog.Buffer) func(*cluster.Config) {
	return func(c *cluster.Config) {
		w := zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), buf)
		c.Logger = zerolog.New(w).With().Str("test_node", c.NodeName).Logger()
	}
}

// withFastFailureDetection makes a crashed node suspect within about a
// second and dead 1.6–3.2 s later.
func withFastFailureDetection(c *cluster.Config) {
	c.Memberlist.ProbeInterval = 400 * time.Millisecond
	c.Memberlist.ProbeTimeout = 200 * time.Millisecond
	c.Memberlist.SuspicionMult = 4           // min suspicion 4 × 400 ms = 1.6 s: every peer probes the node first
	c.Memberlist.SuspicionMaxTimeoutMult = 2 // max 3.2 s without confirmations
}

// mustStart builds and starts a node and shuts it down when the test ends.
func mustStart(tb testing.TB, cfg cluster.Config) *cluster.Cluster {
	tb.Helper()
	c, err := cluster.New(cfg)
	if err != nil {
		tb.Fatalf("New(%s): %v", cfg.NodeName, err)
	}
	if err := c.Start(context.Background()); err != nil {
		tb.Fatalf("Start(%s): %v", cfg.NodeName, err)
	}
	tb.Cleanup(func() {
		if err := c.Shutdown(2 * time.Second); err != nil {
			tb.Logf("Shutdown(%s): %v", cfg.NodeName, err)
		}
	})
	return c
}

// selfAddr is c's gossip address as a join seed.
func selfAddr(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	for _, m := range c.Members() {
		if m.Self {
			return net.JoinHostPort(m.Addr, strconv.Itoa(m.Port))
		}
	}
	t.Fatalf("%s: no Self member in %+v", c.LocalName(), c.Members())
	return ""
}

func member(c *cluster.Cluster, name string) (cluster.Member, bool) {
	for _, m := range c.Members() {
		if m.Name == name {
			return m, true
		}
	}
	return cluster.Member{}, false
}

// stateIs returns nil once c lists name in state want.
func stateIs(c *cluster.Cluster, name string, want cluster.State) error {
	m, ok := member(c, name)
	if !ok {
		return fmt.Errorf("%s: %s not listed, want %s; members %+v", c.LocalName(), name, want, c.Members())
	}
	if m.State != want {
		return fmt.Errorf("%s: %s is %s, want %s", c.LocalName(), name, m.State, want)
	}
	return nil
}

// allAlive returns nil once every node lists exactly the given nodes, all
// alive, with their gossiped zone and URL and Self set on itself only.
func allAlive(nodes ...*cluster.Cluster) error {
	for _, n := range nodes {
		got := n.Members()
		if len(got) != len(nodes) {
			return fmt.Errorf("%s: %d members %+v, want %d", n.LocalName(), len(got), got, len(nodes))
		}
		for i, m := range got {
			if i > 0 && got[i-1].Name >= m.Name {
				return fmt.Errorf("%s: members not sorted by name: %+v", n.LocalName(), got)
			}
			want := cluster.Member{
				Name: m.Name, Addr: "127.0.0.1", Port: m.Port, Zone: zoneOf(m.Name), EurekaURL: urlOf(m.Name),
				State: cluster.StateAlive, Self: m.Name == n.LocalName(),
			}
			if m != want || m.Port == 0 {
				return fmt.Errorf("%s: member = %+v, want %+v", n.LocalName(), m, want)
			}
		}
	}
	return nil
}

// startThree starts a, then b and c joining through a.
func startThree(t *testing.T, opts ...func(*cluster.Config)) (a, b, c *cluster.Cluster) {
	t.Helper()
	a = mustStart(t, testConfig(t, "a", opts...))
	seed := selfAddr(t, a)
	b = mustStart(t, testConfig(t, "b", append(opts, withJoin(seed))...))
	c = mustStart(t, testConfig(t, "c", append(opts, withJoin(seed))...))
	testwait.For(t, converge, "gossip to converge", func() error { return allAlive(a, b, c) })
	return a, b, c
}

func TestCluster_Start_threeNodesFromOneSeed(t *testing.T) {
	t.Parallel()
	a, b, c := startThree(t)
	for _, n := range []*cluster.Cluster{a, b, c} {
		if !n.Joined() {
			t.Errorf("%s: Joined() = false, want true", n.LocalName())
		}
		select {
		case <-n.Changes():
		default:
			t.Errorf("%s: no pending Changes() notification after peers joined", n.LocalName())
		}
	}
	if got := b.LocalName(); got != "b" {
		t.Errorf("LocalName() = %q, want b", got)
	}
}

func TestCluster_Join_seedStartsLater(t *testing.T) {
	t.Parallel()
	port := mustFreePort(t)
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	var logs testlog.Buffer
	b := mustStart(t, testConfig(t, "b", withJoin(seed), withLogs(t, &logs)))
	if b.Joined() {
		t.Fatalf("b: Joined() = true before anything listens on %s", seed)
	}
	testwait.For(t, converge, "gossip to converge", func() error {
		if !strings.Contains(logs.String(), "join failed; retrying") {
			return fmt.Errorf("b logged no failed join attempt yet; log:\n%s", logs.String())
		}
		return nil
	})

	a := mustStart(t, testConfig(t, "a", func(c *cluster.Config) { c.BindPort = port }))
	testwait.For(t, converge, "gossip to converge", func() error { return allAlive(a, b) })
	// memberlist lists both as soon as the push/pull of b's join attempt is
	// through; the join loop marks b joined when that attempt returns.
	testwait.For(t, converge, "gossip to converge", func() error {
		if !b.Joined() || !strings.Contains(logs.String(), "joined cluster") {
			return fmt.Errorf("b: Joined() = %v after joining a, want true, with \"joined cluster\" logged:\n%s", b.Joined(), logs.String())
		}
		return nil
	})
}

func TestCluster_Shutdown_peersSeeLeft(t *testing.T) {
	t.Parallel()
	a, b, c := startThree(t)
	if err := c.Shutdown(2 * time.Second); err != nil {
		t.Fatalf("c.Shutdown: %v", err)
	}
	testwait.For(t, converge, "gossip to converge", func() error {
		if err := stateIs(a, "c", cluster.StateLeft); err != nil {
			return err
		}
		return stateIs(b, "c", cluster.StateLeft)
	})
	if err := c.Shutdown(time.Second); err != nil {
		t.Errorf("second c.Shutdown = %v, want nil", err)
	}
	if err := stateIs(c, "c", cluster.StateLeft); err != nil {
		t.Errorf("after Shutdown: %v", err)
	}
	if err := c.Start(context.Background()); err != cluster.ErrShutdown {
		t.Errorf("Start after Shutdown = %v, want ErrShutdown", err)
	}
}

func TestCluster_Crash_peersSeeSuspectThenDead(t *testing.T) {
	t.Parallel()
	a, b, c := startThree(t, withFastFailureDetection)
	if err := c.Crash(); err != nil {
		t.Fatalf("c.Crash: %v", err)
	}
	// Each peer must list c as suspect at some point before dead.
	sawSuspect := map[*cluster.Cluster]bool{}
	testwait.For(t, converge, "gossip to converge", func() error {
		for _, n := range []*cluster.Cluster{a, b} {
			if stateIs(n, "c", cluster.StateSuspect) == nil {
				sawSuspect[n] = true
			}
			if !sawSuspect[n] {
				if err := stateIs(n, "c", cluster.StateAlive); err != nil {
					return fmt.Errorf("%v (never listed as suspect)", err)
				}
				return fmt.Errorf("%s has not listed c as suspect yet", n.LocalName())
			}
		}
		return nil
	})
	testwait.For(t, converge, "gossip to converge", func() error {
		if err := stateIs(a, "c", cluster.StateDead); err != nil {
			return err
		}
		return stateIs(b, "c", cluster.StateDead)
	})
	if err := allAlive(a, b); err == nil {
		t.Errorf("allAlive(a, b) = nil, want c still listed as dead")
	}
}

func TestCluster_Join_differentSecretKeys(t *testing.T) {
	t.Parallel()
	keyA := bytes.Repeat([]byte{1}, 32)
	keyB := bytes.Repeat([]byte{2}, 16)
	tests := []struct {
		name       string
		seed, join []byte // SecretKey of the seed a and of the joining b
	}{
		{"different keys", keyA, keyB},
		{"key on the seed only", keyA, nil},
		{"key on the joiner only", nil, keyB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logsA, logsB testlog.Buffer
			a := mustStart(t, testConfig(t, "a", withLogs(t, &logsA), func(c *cluster.Config) { c.SecretKey = tt.seed }))
			b := mustStart(t, testConfig(t, "b", withLogs(t, &logsB), withJoin(selfAddr(t, a)),
				func(c *cluster.Config) { c.SecretKey = tt.join }))

			const hint = "is cluster.secret-key the same on every node?"
			testwait.For(t, converge, "gossip to converge", func() error {
				if n := strings.Count(logsB.String(), "join failed; retrying"); n < 2 {
					return fmt.Errorf("b logged %d failed join attempts, want 2; log:\n%s", n, logsB.String())
				}
				return nil
			})
			for name, logs := range map[string]*testlog.Buffer{"a": &logsA, "b": &logsB} {
				if !hasLine(logs.String(), hint, "warn", "error") {
					t.Errorf("%s's log has no warn or error line with the hint %q:\n%s", name, hint, logs.String())
				}
			}
			for _, n := range []*cluster.Cluster{a, b} {
				if got := n.Members(); len(got) != 1 || !got[0].Self {
					t.Errorf("%s: Members() = %+v, want only itself", n.LocalName(), got)
				}
			}
			if b.Joined() {
				t.Errorf("b: Joined() = true with a different secret key")
			}
		})
	}
}

// hasLine reports whether a JSON log line at one of levels contains s.
func hasLine(log, s string, levels ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		for _, l := range levels {
			if strings.Contains(line, `"level":"`+l+`"`) {
				return true
			}
		}
	}
	return false
}

func TestCluster_Start_mockNetwork(t *testing.T) {
	t.Parallel()
	var network memberlist.MockNetwork // no sockets
	names := []string{"a", "b", "c"}
	cfgs := make([]cluster.Config, len(names))
	for i, name := range names {
		cfgs[i] = testConfig(t, name, func(c *cluster.Config) {
			c.Memberlist.Transport = network.NewTransport(name)
		})
	}
	nodes := make([]*cluster.Cluster, len(names))
	for i, cfg := range cfgs {
		if i > 0 {
			cfg.Join = []string{selfAddr(t, nodes[0])}
		}
		nodes[i] = mustStart(t, cfg)
	}
	// A stopped MockTransport never drains its channels, so a graceful
	// leave would wait on peers' stuck sends: stop them all without one.
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.Crash()
		}
	})
	testwait.For(t, converge, "gossip to converge", func() error {
		for _, n := range nodes {
			if len(n.Members()) != len(nodes) {
				return fmt.Errorf("%s: members %+v, want %d", n.LocalName(), n.Members(), len(nodes))
			}
			for _, m := range n.Members() {
				if m.State != cluster.StateAlive || m.EurekaURL != urlOf(m.Name) || m.Zone != zoneOf(m.Name) ||
					m.Self != (m.Name == n.LocalName()) {
					return fmt.Errorf("%s: member %+v", n.LocalName(), m)
				}
			}
		}
		return nil
	})
}

// mustFreePort returns a port that is free on 127.0.0.1 for both TCP and
// UDP, as memberlist binds both.
func mustFreePort(tb testing.TB) int {
	tb.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("listen: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = u.Close()
		return port
	}
	tb.Fatal("no port free for both TCP and UDP")
	return 0
}
