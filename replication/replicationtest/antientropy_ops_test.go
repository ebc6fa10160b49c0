package replicationtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

func newLoggedAECluster(t *testing.T, level zerolog.Level, names ...string) (*replicationtest.Cluster, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	c := replicationtest.NewCluster(t, replicationtest.ClusterConfig{
		Seed:        3,
		Logger:      zerolog.New(logs).Level(level),
		AntiEntropy: true,
	}, names...)
	return c, logs
}

// A failed round makes the peer "failing" and not in sync, with the error
// and its time; a good round makes it in sync again and keeps the error.
func TestAntiEntropy_failedRoundIsNotInSync(t *testing.T) {
	c, _ := newLoggedAECluster(t, zerolog.WarnLevel, "a", "b")
	c.AntiEntropyRound()
	st := c.Node("b").AE.Stats()[0]
	if !st.InSync || st.State() != replication.AEInSync || st.RoundsOK != 1 {
		t.Fatalf("after a good round: %+v (%s)", st, st.State())
	}
	cutBoth(c, "a", "b")
	c.Clock.Advance(time.Second)
	failedAt := c.Clock.Now()
	c.AntiEntropyRound()
	st = c.Node("b").AE.Stats()[0]
	if st.InSync || st.State() != replication.AEFailing || st.LastError == "" || !st.LastErrorAt.Equal(failedAt) || st.RoundsFailed != 1 {
		t.Fatalf("after a failed round: %+v (%s)", st, st.State())
	}
	c.Net.Heal()
	c.AntiEntropyRound()
	st = c.Node("b").AE.Stats()[0]
	if !st.InSync || st.State() != replication.AEInSync || st.LastError == "" || st.RoundsOK != 2 || st.RoundsFailed != 1 {
		t.Fatalf("after the link came back: %+v (%s)", st, st.State())
	}
}

// A peer whose rounds keep failing is warned about at the default level:
// the first failure, then at most once a minute with the count of those
// not logged; and once when rounds work again.
func TestAntiEntropy_failuresWarnedRateLimited(t *testing.T) {
	c, logs := newLoggedAECluster(t, zerolog.InfoLevel, "a", "b")
	cutBoth(c, "a", "b")
	for range 7 { // rounds at 0, 10, ..., 60 s
		c.AntiEntropyRound()
		c.Clock.Advance(10 * time.Second)
	}
	onB := func(msg string) []map[string]any {
		var out []map[string]any
		for _, l := range logs.Lines(t, msg) {
			if l["node"] == "b" {
				out = append(out, l)
			}
		}
		return out
	}
	warned := onB("anti-entropy round failed")
	if len(warned) != 2 {
		t.Fatalf("%d warnings for 7 failed rounds in 60 s, want 2 (the first, then one a minute later): %v", len(warned), warned)
	}
	if w := warned[0]; w["level"] != "warn" || w["peer"] != "a" || w["error"] == nil || w["suppressed"] != nil {
		t.Errorf("first warning: %v", w)
	}
	if w := warned[1]; w["suppressed"] != float64(5) || w["failed_rounds"] != float64(7) {
		t.Errorf("second warning: %v, want suppressed 5, failed_rounds 7", w)
	}
	c.Net.Heal()
	c.AntiEntropyRound()
	if back := onB("anti-entropy rounds with the peer run through again"); len(back) != 1 || back[0]["failed_rounds"] != float64(7) {
		t.Errorf("recovery lines: %v", back)
	}
	// A new run of failures is warned about at once.
	cutBoth(c, "a", "b")
	c.AntiEntropyRound()
	if n := len(onB("anti-entropy round failed")); n != 3 {
		t.Errorf("%d warnings after a new failure, want 3", n)
	}
}

// The repair log line names the instances (app/id and kind), the first
// ten of them, and how many more.
func TestAntiEntropy_repairLogNamesInstances(t *testing.T) {
	c, logs := newLoggedAECluster(t, zerolog.InfoLevel, "a", "b")
	cutBoth(c, "a", "b")
	for i := range 12 {
		c.MustApply("a", register("APP", fmt.Sprintf("i-%02d", i)))
	}
	expireQueued(c)
	c.Net.Heal()
	c.AntiEntropyRound()
	var line map[string]any
	for _, l := range logs.Lines(t, "anti-entropy repaired the registry") {
		if l["node"] == "b" {
			line = l
		}
	}
	if line == nil {
		t.Fatal("no repair line on b")
	}
	names, _ := line["instances"].([]any)
	if len(names) != 10 || line["more"] != float64(2) || line["missing"] != float64(12) {
		t.Fatalf("repair line: %v", line)
	}
	for _, n := range names {
		if s, _ := n.(string); !strings.HasPrefix(s, "APP/i-") || !strings.HasSuffix(s, " (missing)") {
			t.Errorf("named %q, want APP/i-NN (missing)", n)
		}
	}
}
