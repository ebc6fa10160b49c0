package registry

import (
	"runtime"
	"testing"
)

// A processor keeps its stripe through collections and GOMAXPROCS
// changes: the stripes in use are those of processors 0 to GOMAXPROCS-1,
// distinct, and so are their counter cells. (Stripes drawn from a
// sequence whenever a pool forgot its token drifted past GOMAXPROCS and
// soon handed two processors one stripe.)
func TestLocalStripe_staysWithTheProcessor(t *testing.T) {
	const procs = 2
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	for round := range 50 {
		runtime.GOMAXPROCS(1)
		runtime.GOMAXPROCS(procs)
		runtime.GC()
		runtime.GC()
		if s := localStripe(); s >= procs {
			t.Fatalf("round %d: stripe %d with GOMAXPROCS %d: two processors may share a stripe", round, s, procs)
		}
	}
	if lockStripes%counterShards != 0 || counterShards < 2 {
		t.Fatalf("stripes %d and counter cells %d: distinct stripes below counterShards must get distinct cells", lockStripes, counterShards)
	}
}
