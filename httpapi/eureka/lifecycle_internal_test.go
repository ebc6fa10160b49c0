package eureka

import (
	"runtime"
	"strings"
	"testing"

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
	used.watch.appVersion("APP")
	if !hubRuns() {
		t.Fatal("the watch feed did not start with the first index read")
	}
	used.StopWatches()
	if hubRuns() {
		t.Fatal("the watch feed still runs after StopWatches")
	}
}
