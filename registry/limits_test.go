package registry_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func smallLimits(c *registry.Config) {
	c.Limits = registry.Limits{
		MaxInstances: 10, MaxInstancesPerApp: 4, MaxMetadataEntries: 3, MaxMetadataBytes: 64,
		MaxNameLength: 64, MaxClockSkew: time.Minute,
	}
}

func TestRegistry_Register_limits(t *testing.T) {
	long := strings.Repeat("x", 65)
	tests := []struct {
		name  string
		in    *registry.Instance
		limit registry.Limit
		kind  error
	}{
		{"app name", registrytest.NewInstance(long, "i-1"), registry.LimitNameLength, registry.ErrLimitExceeded},
		{"instance id", registrytest.NewInstance("A", long), registry.LimitNameLength, registry.ErrLimitExceeded},
		{"host name", registrytest.NewInstance("A", "i-1", func(in *registry.Instance) { in.HostName = long }), registry.LimitNameLength, registry.ErrLimitExceeded},
		{"vip", registrytest.NewInstance("A", "i-1", registrytest.WithVIP(long)), registry.LimitNameLength, registry.ErrLimitExceeded},
		{"url", registrytest.NewInstance("A", "i-1", func(in *registry.Instance) { in.HomePageURL = long }), registry.LimitNameLength, registry.ErrLimitExceeded},
		{"metadata entries", registrytest.NewInstance("A", "i-1", registrytest.WithMetadata(map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"})), registry.LimitMetadataEntries, registry.ErrLimitExceeded},
		{"metadata bytes", registrytest.NewInstance("A", "i-1", registrytest.WithMetadata(map[string]string{"k": strings.Repeat("v", 64)})), registry.LimitMetadataBytes, registry.ErrLimitExceeded},
		{"future lastDirtyTimestamp", registrytest.NewInstance("A", "i-1", registrytest.WithDirty(registrytest.Epoch.Add(2*time.Minute).UnixMilli())), registry.LimitClockSkew, registry.ErrClockSkew},
		{"MaxInt64 lastDirtyTimestamp", registrytest.NewInstance("A", "i-1", registrytest.WithDirty(math.MaxInt64)), registry.LimitClockSkew, registry.ErrClockSkew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := mustNew(t, smallLimits)
			for _, replicated := range []bool{false, true} {
				op := registry.RegisterOp(tt.in)
				if replicated {
					op = op.From(registry.OriginPeer)
				}
				_, err := r.Apply(op)
				var le *registry.LimitError
				if !errors.As(err, &le) || le.Limit != tt.limit || !errors.Is(err, tt.kind) || !errors.Is(err, registry.ErrLimitExceeded) {
					t.Fatalf("Register(replicated=%v) = %v, want a %s LimitError", replicated, err, tt.limit)
				}
				if !strings.Contains(err.Error(), "muster."+string(tt.limit)) || len(err.Error()) > 300 {
					t.Fatalf("error %q should name muster.%s and stay short", err, tt.limit)
				}
			}
			if r.Len() != 0 || r.Version() != 0 {
				t.Fatalf("refused write changed the registry: Len %d, Version %d", r.Len(), r.Version())
			}
			if got := r.LimitRejections()[tt.limit]; got != 2 {
				t.Fatalf("LimitRejections[%s] = %d, want 2", tt.limit, got)
			}
		})
	}
}

func TestRegistry_Register_instanceLimits(t *testing.T) {
	r, _ := mustNew(t, smallLimits)
	for i := range 4 {
		mustRegister(t, r, registrytest.NewInstance("A", fmt.Sprintf("a-%d", i)))
	}
	_, err := r.Apply(registry.RegisterOp(registrytest.NewInstance("A", "a-4")))
	if !errors.Is(err, registry.ErrAppFull) {
		t.Fatalf("5th instance of A: %v, want ErrAppFull", err)
	}
	// A known instance may always register again.
	mustRegister(t, r, registrytest.NewInstance("A", "a-0", registrytest.WithVIP("new")))
	for i := range 6 {
		mustRegister(t, r, registrytest.NewInstance(fmt.Sprintf("B%d", i), "b"))
	}
	_, err = r.Apply(registry.RegisterOp(registrytest.NewInstance("C", "c")).From(registry.OriginPeer))
	if !errors.Is(err, registry.ErrCapacity) {
		t.Fatalf("11th instance: %v, want ErrCapacity", err)
	}
	if r.Len() != 10 {
		t.Fatalf("Len = %d, want 10", r.Len())
	}
	got := r.LimitRejections()
	if got[registry.LimitInstancesPerApp] != 1 || got[registry.LimitInstances] != 1 {
		t.Fatalf("LimitRejections = %v", got)
	}
}

func TestRegistry_UpdateMetadata_limits(t *testing.T) {
	r, clk := mustNew(t, smallLimits)
	mustRegister(t, r, registrytest.NewInstance("A", "a", registrytest.WithMetadata(map[string]string{"a": "1", "b": "2"})))
	before, _ := r.Instance("A", "a")
	version := r.Version()
	clk.Advance(10 * time.Second)
	if _, err := r.Apply(registry.MetadataOp("A", "a", map[string]string{"c": "3", "d": "4"})); !errors.Is(err, registry.ErrLimitExceeded) {
		t.Fatalf("UpdateMetadata beyond 3 entries: %v", err)
	}
	after, _ := r.Instance("A", "a")
	if r.Version() != version || after.LastRenewalTimestamp != before.LastRenewalTimestamp || len(after.Metadata) != 2 {
		t.Fatal("refused metadata update changed the instance or renewed its lease")
	}
	if _, err := r.Apply(registry.MetadataOp("A", "a", map[string]string{"c": "3"})); err != nil {
		t.Fatalf("UpdateMetadata within the limit: %v", err)
	}
}

func TestRegistry_Register_leaseFieldsClamped(t *testing.T) {
	r, _ := mustNew(t)
	stored := mustRegister(t, r, registrytest.NewInstance("A", "a", registrytest.WithLeaseDuration(math.MaxInt32), registrytest.WithRenewalInterval(math.MaxInt32)))
	if stored.LeaseDurationSecs != registry.MaxLeaseDurationSecs || stored.RenewalIntervalSecs != registry.MaxRenewalIntervalSecs {
		t.Fatalf("lease %d s, interval %d s; want clamped to %d, %d", stored.LeaseDurationSecs, stored.RenewalIntervalSecs,
			registry.MaxLeaseDurationSecs, registry.MaxRenewalIntervalSecs)
	}
}

// The "Why" case: a status call with lastDirtyTimestamp=MaxInt64 made every
// later registration of the owner (with a new address) lose to it, while
// its heartbeats still got 200, so clients were served a stale address.
func TestRegistry_UpdateStatus_futureDirtyTimestampCannotPinRecord(t *testing.T) {
	r, clk := mustNew(t)
	mustRegister(t, r, registrytest.NewInstance("A", "a", func(in *registry.Instance) { in.IPAddr = "10.0.0.1" }))
	for _, ts := range []int64{math.MaxInt64, clk.Now().Add(time.Hour).UnixMilli()} {
		if _, err := r.Apply(registry.StatusOp("A", "a", registry.StatusUp).Dirty(ts)); !errors.Is(err, registry.ErrClockSkew) {
			t.Fatalf("UpdateStatus(lastDirty=%d) = %v, want ErrClockSkew", ts, err)
		}
		if _, err := r.Apply(registry.DeleteOverrideOp("A", "a", registry.StatusUnknown).Dirty(ts).From(registry.OriginPeer)); !errors.Is(err, registry.ErrClockSkew) {
			t.Fatalf("DeleteStatusOverride(lastDirty=%d) = %v, want ErrClockSkew", ts, err)
		}
	}
	clk.Advance(time.Second)
	mustRegister(t, r, registrytest.NewInstance("A", "a", func(in *registry.Instance) { in.IPAddr = "10.0.0.2" }))
	if iv, _ := r.Instance("A", "a"); iv.IPAddr != "10.0.0.2" {
		t.Fatalf("address after the owner's re-registration = %s, want 10.0.0.2", iv.IPAddr)
	}
	// Within the skew it is accepted, and holds the record at most that long.
	within := clk.Now().Add(time.Minute).UnixMilli()
	if _, err := r.Apply(registry.StatusOp("A", "a", registry.StatusUp).Dirty(within)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute + time.Second)
	mustRegister(t, r, registrytest.NewInstance("A", "a", func(in *registry.Instance) { in.IPAddr = "10.0.0.3" }))
	if iv, _ := r.Instance("A", "a"); iv.IPAddr != "10.0.0.3" {
		t.Fatalf("address a minute later = %s, want 10.0.0.3", iv.IPAddr)
	}
}

func TestQuotePrefix(t *testing.T) {
	if got := registry.QuotePrefix("short"); got != `"short"` {
		t.Errorf("QuotePrefix(short) = %s", got)
	}
	got := registry.QuotePrefix(strings.Repeat("é", 1<<20))
	if len(got) > 100 || !strings.Contains(got, "(2097152 bytes)") {
		t.Errorf("QuotePrefix(2 MB) = %s", got)
	}
}
