package httpapi_test

import (
	"runtime"
	"testing"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// New starts nothing (the style guide's rule, issue 23): building a server
// and dropping it leaves no goroutine behind, and StopWatches on a server
// that never watched returns.
func TestNew_startsNothing(t *testing.T) {
	rcfg := registry.DefaultConfig()
	rcfg.Now = registrytest.NewClock().Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	cfg := httpapi.DefaultConfig()
	cfg.Registry = reg
	srv, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if after := runtime.NumGoroutine(); after != before {
		t.Fatalf("New started %d goroutines", after-before)
	}
	srv.StopWatches()
}
