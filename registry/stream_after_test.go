package registry_test

import (
	"fmt"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// SubscribeAfter resumes after a Seq the consumer saw: the events after it
// while the outbox still holds them, a resync when it does not or when the
// Seq is ahead of the newest event (from before a restart).
func TestRegistry_SubscribeAfter(t *testing.T) {
	r, _ := mustNew(t, func(c *registry.Config) { c.OutboxSize = 4 })
	registerN(t, r, 3)
	for _, tc := range []struct {
		after      uint64
		wantResync bool
		want       string
	}{
		{0, false, "[1 register APP/i-0 client 2 register APP/i-1 client 3 register APP/i-2 client]"},
		{2, false, "[3 register APP/i-2 client]"},
		{3, false, "[]"},
		{4, true, "[]"},
		{99, true, "[]"},
	} {
		c, resync := r.SubscribeAfter(tc.after)
		select {
		case <-c.Ready():
		default:
			t.Fatalf("after %d: cursor not ready", tc.after)
		}
		evs, behind := c.Read(nil)
		if resync != tc.wantResync || behind || fmt.Sprint(describe(evs)) != tc.want {
			t.Errorf("after %d: resync %v, events %v (behind %v); want resync %v, %s", tc.after, resync, describe(evs), behind, tc.wantResync, tc.want)
		}
		c.Close()
	}
	// Four more changes: 1…3 are overwritten, so resuming after 1 is a
	// resync while after 3 still reads 4…7.
	for i := range 4 {
		mustRegister(t, r, registrytest.NewInstance("APP", fmt.Sprintf("j%d", i)))
	}
	if c, resync := r.SubscribeAfter(1); !resync {
		t.Error("resuming from an overwritten Seq: no resync")
	} else {
		c.Close()
	}
	c, resync := r.SubscribeAfter(3)
	defer c.Close()
	if evs, _ := c.Read(nil); resync || len(evs) != 4 || evs[0].Seq != 4 {
		t.Errorf("after 3: resync %v, %v", resync, describe(evs))
	}
}
