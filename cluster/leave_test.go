package cluster_test

import (
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/cluster"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
)

// TestCluster_Shutdown_allTogether: a whole cluster stopped at once (a
// compose down, a rollout of every pod). Each node's leave broadcast goes
// to members that are leaving too; once they have left there is nobody
// to tell, and waiting for the broadcast to go out is no failure: no node
// returns "timeout waiting for leave broadcast" nor logs a warning or an
// error about its leave.
func TestCluster_Shutdown_allTogether(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		bufs := make([]*testlog.Buffer, 3)
		for i := range bufs {
			bufs[i] = &testlog.Buffer{}
		}
		a := mustStart(t, testConfig(t, "a", withLogs(t, bufs[0])))
		b := mustStart(t, testConfig(t, "b", withLogs(t, bufs[1]), withJoin(selfAddr(t, a))))
		c := mustStart(t, testConfig(t, "c", withLogs(t, bufs[2]), withJoin(selfAddr(t, a))))
		testwait.For(t, converge, "three alive", func() error { return allAlive(a, b, c) })

		errs := make([]error, 3)
		took := make([]time.Duration, 3)
		var wg sync.WaitGroup
		for i, n := range []*cluster.Cluster{a, b, c} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				errs[i] = n.Shutdown(2 * time.Second)
				took[i] = time.Since(t0)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: node %d's Shutdown (%s): %v", round, i, took[i].Round(time.Millisecond), err)
			}
			if log := bufs[i].String(); hasLine(log, "leave", "warn", "error") {
				t.Errorf("round %d: node %d logged its leave as a failure:\n%s", round, i, log)
			}
		}
	}
}
