package eureka

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func hubRuns() bool {
	buf := make([]byte, 1<<22)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*watchHub).run")
}

// New starts nothing (issue 23): the watch hub's feed starts with the
// first watch, and StopWatches ends it whether or not it started.
func TestNew_startsNothing(t *testing.T) {
	// A hub stopped just before (an earlier run of this test, with
	// -count) may still be returning: its goroutine ends on its own.
	testwait.True(t, 5*time.Second, "no watch feed left running", func() bool { return !hubRuns() })
	rcfg := registry.DefaultConfig()
	rcfg.Now = registrytest.NewClock().Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	idle := New(Config{Registry: reg})
	if hubRuns() {
		t.Fatal("the watch feed runs after New")
	}
	idle.StopWatches() // never started: must return

	used := New(Config{Registry: reg})
	t.Cleanup(used.StopWatches) // a failure below leaves no feed to the next run
	used.watch.appVersion("APP")
	// Started, its goroutine may not be scheduled yet.
	testwait.True(t, 5*time.Second, "the watch feed starts with the first index read", hubRuns)
	used.StopWatches()
	// StopWatches returns once the feed has said it is done; its goroutine
	// then returns, a moment later.
	testwait.True(t, 5*time.Second, "the watch feed ends after StopWatches", func() bool { return !hubRuns() })
}
