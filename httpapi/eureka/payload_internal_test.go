package eureka

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

func snapAt(version, deltaVersion uint64) *registry.Snapshot {
	return &registry.Snapshot{Version: version, DeltaVersion: deltaVersion}
}

func TestPayloadCache_Get_oneBuildPerVersion(t *testing.T) {
	pc := newPayloadCache(16)
	key := payloadKey{kind: payloadFull}
	var builds atomic.Int32
	release := make(chan struct{})
	build := func() payload {
		builds.Add(1)
		<-release
		return bytesPayload([]byte("v1"))
	}
	var wg sync.WaitGroup
	got := make([]string, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = string(pc.get(key, snapAt(1, 1), build).bytes())
		}()
	}
	for builds.Load() == 0 {
		// wait until the first reader is building
	}
	close(release)
	wg.Wait()
	if builds.Load() != 1 {
		t.Fatalf("32 concurrent readers caused %d builds, want 1", builds.Load())
	}
	for i, g := range got {
		if g != "v1" {
			t.Fatalf("reader %d got %q", i, g)
		}
	}
	if b := pc.get(key, snapAt(1, 1), func() payload { t.Fatal("rebuilt an unchanged version"); return payload{} }); string(b.bytes()) != "v1" {
		t.Fatalf("cached read got %q", b.bytes())
	}
}

// A full-fetch reader never gets a payload older than its snapshot; a delta
// reader that waited for a build in flight takes its result.
func TestPayloadCache_Get_stalenessRules(t *testing.T) {
	for _, kind := range []payloadKind{payloadFull, payloadDelta} {
		pc := newPayloadCache(16)
		key := payloadKey{kind: kind}
		started := make(chan struct{})
		release := make(chan struct{})
		go pc.get(key, snapAt(1, 1), func() payload {
			close(started)
			<-release
			return bytesPayload([]byte("v1"))
		})
		<-started
		res := make(chan string)
		go func() {
			res <- string(pc.get(key, snapAt(2, 2), func() payload { return bytesPayload([]byte("v2")) }).bytes())
		}()
		// Release the first build only once the second reader waits for it.
		for {
			pc.mu.Lock()
			waiting := pc.entries[key].waiters
			pc.mu.Unlock()
			if waiting == 1 {
				break
			}
			runtime.Gosched()
		}
		close(release)
		got := <-res
		want := map[payloadKind]string{payloadFull: "v2", payloadDelta: "v1"}[kind]
		if got != want {
			t.Errorf("kind %d: reader with version 2 got %q, want %q", kind, got, want)
		}
	}
}

func TestPayloadCache_sweepBoundsSize(t *testing.T) {
	pc := newPayloadCache(8)
	for i := 0; i < 100; i++ {
		pc.get(payloadKey{kind: payloadApp, name: fmt.Sprint(i)}, snapAt(uint64(i), 0), func() payload { return bytesPayload([]byte("x")) })
	}
	if n := len(pc.entries); n > 8 {
		t.Fatalf("cache holds %d entries, bound 8", n)
	}
}

// dictTail, the dictionary of the piece after an app, is a suffix of the
// app's piece in both formats and both forms, whatever its number of instances (a piece
// compressed against a wrong dictionary decodes to other bytes).
func TestDictTail_endsTheAppsPiece(t *testing.T) {
	for _, n := range []int{0, 1, dictTailInstances - 1, dictTailInstances, dictTailInstances + 1, 50} {
		app := registry.AppView{Name: "ORDERS"}
		for i := range n {
			in := registrytest.NewInstance("ORDERS", fmt.Sprintf("i-%02d", i),
				registrytest.WithMetadata(map[string]string{"zone": fmt.Sprintf("z%d", i%3)}))
			app.Instances = append(app.Instances, registry.InstanceView{Instance: in, LastRenewalTimestamp: int64(i)})
		}
		for _, form := range []struct {
			xml, compact bool
			encode       func([]byte, registry.AppView) []byte
		}{
			{false, false, wire.AppendApplicationBodyJSON},
			{true, false, wire.AppendApplicationXML},
			{false, true, wire.AppendApplicationBodyCompactJSON},
			{true, true, wire.AppendApplicationCompactXML},
		} {
			xml, compact := form.xml, form.compact
			whole := form.encode(nil, app)
			tail := dictTail(app, xml, compact)
			if !bytes.HasSuffix(whole, tail) || (n > 0 && len(tail) < 100) {
				t.Fatalf("%d instances, xml %v, compact %v: tail %q is not a suffix of %q", n, xml, compact, tail, whole)
			}
			if n > dictTailInstances && len(tail) >= len(whole)*(dictTailInstances+1)/n {
				t.Fatalf("%d instances, xml %v, compact %v: tail of %d bytes is more than the last %d instances", n, xml, compact, len(tail), dictTailInstances)
			}
		}
	}
}
