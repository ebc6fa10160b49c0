package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
)

// withKeys sets the key gossip is sent with and the further keys accepted.
func withKeys(primary []byte, others ...[]byte) func(*cluster.Config) {
	return func(c *cluster.Config) { c.SecretKey, c.SecretKeys = primary, others }
}

// TestCluster_keyringRotation rotates the gossip key of a three-node
// cluster on loopback the way README describes, one node restarted at a
// time with its new keys: add the new key everywhere, make it the primary
// everywhere, drop the old one. After every single restart all three list
// each other alive, so nodes with overlapping keyrings keep talking
// throughout. At the end a node that knows only the old key cannot join.
func TestCluster_keyringRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16)
	nodes := map[string]*cluster.Cluster{}
	stop := func(name string) {
		if err := nodes[name].Shutdown(2 * time.Second); err != nil {
			t.Logf("Shutdown(%s): %v", name, err)
		}
	}
	t.Cleanup(func() {
		for name := range nodes {
			stop(name)
		}
	})
	start := func(name string, port int, keys func(*cluster.Config), seeds ...string) {
		t.Helper()
		c, err := cluster.New(testConfig(t, name, keys, withJoin(seeds...), func(c *cluster.Config) { c.BindPort = port }))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		nodes[name] = c
	}
	all := func() []*cluster.Cluster { return []*cluster.Cluster{nodes["a"], nodes["b"], nodes["c"]} }

	start("a", 0, withKeys(oldKey))
	start("b", 0, withKeys(oldKey), selfAddr(t, nodes["a"]))
	start("c", 0, withKeys(oldKey), selfAddr(t, nodes["a"]))
	testwait.For(t, converge, "gossip to converge", func() error { return allAlive(all()...) })

	for _, step := range []struct {
		what string
		keys func(*cluster.Config)
	}{
		{"1. new key accepted, old one sent", withKeys(oldKey, newKey)},
		{"2. new key sent, old one accepted", withKeys(newKey, oldKey)},
		{"3. old key dropped", withKeys(newKey)},
	} {
		for _, name := range []string{"a", "b", "c"} {
			// A restart as in production: same name, same port, back
			// once the others have seen it leave.
			self, _ := member(nodes[name], name)
			stop(name)
			seed := "b"
			if name == "b" {
				seed = "c"
			}
			for _, other := range all() {
				if other.LocalName() != name {
					testwait.For(t, converge, "gossip to converge", func() error { return stateIs(other, name, cluster.StateLeft) })
				}
			}
			start(name, self.Port, step.keys, selfAddr(t, nodes[seed]))
			testwait.For(t, converge, "gossip to converge", func() error {
				if err := allAlive(all()...); err != nil {
					return fmt.Errorf("step %s, %s restarted: %w", step.what, name, err)
				}
				return nil
			})
		}
	}

	var logs testlog.Buffer
	stale, err := cluster.New(testConfig(t, "stale", withKeys(oldKey), withJoin(selfAddr(t, nodes["a"])), withLogs(t, &logs)))
	if err != nil {
		t.Fatal(err)
	}
	if err := stale.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stale.Shutdown(2 * time.Second)
	testwait.For(t, converge, "gossip to converge", func() error {
		if n := strings.Count(logs.String(), "join failed; retrying"); n < 2 {
			return fmt.Errorf("the node with the old key logged %d failed joins, want 2", n)
		}
		return nil
	})
	if stale.Joined() || len(nodes["a"].Members()) != 3 {
		t.Errorf("a node with only the dropped key joined: Joined %v, a lists %+v", stale.Joined(), nodes["a"].Members())
	}
}

func TestConfig_Validate_secretKeys(t *testing.T) {
	for _, tc := range []struct {
		primary []byte
		others  [][]byte
		want    string
	}{
		{nil, [][]byte{make([]byte, 16)}, "SecretKeys are set without a SecretKey"},
		{make([]byte, 32), [][]byte{make([]byte, 16), make([]byte, 20)}, "SecretKeys[1]: key is 20 bytes"},
		{make([]byte, 32), [][]byte{make([]byte, 24)}, ""},
	} {
		cfg := cluster.DefaultConfig()
		cfg.NodeName = "n"
		cfg.SecretKey, cfg.SecretKeys = tc.primary, tc.others
		err := cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%d-byte primary, %d others) = %v, want %q", len(tc.primary), len(tc.others), err, tc.want)
		}
	}
}
