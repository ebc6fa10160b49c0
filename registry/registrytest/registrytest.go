// Package registrytest holds test helpers for code built on the registry: a
// clock that tests move by hand, and instance fixtures.
package registrytest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/muster-registry/muster/registry"
)

// Clock is a manual clock. Its zero value starts at a fixed, readable date;
// it only moves when Advance or Set is called. Safe for concurrent use.
type Clock struct {
	// mu guards now and waiters.
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

// clockWaiter is one After not yet due.
type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

// Epoch is where a zero Clock starts: 2024-06-10 06:13:20 UTC
// (1718000000000 ms, the timestamp of EUREKA.md's examples).
var Epoch = time.UnixMilli(1718000000000).UTC()

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	c.now = c.now.Add(d)
	c.fireLocked()
	return c.now
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.fireLocked()
	c.mu.Unlock()
}

// After returns a channel that receives the clock's time once Advance or
// Set moves it d past now (at once when d ≤ 0), as time.After would: code
// that waits on a clock runs its timers on this one in tests.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, clockWaiter{c.now.Add(d), ch})
	return ch
}

// Waiting is how many After channels are not yet due: a test knows a
// goroutine is parked on the clock before it moves it.
func (c *Clock) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// fireLocked sends the time to every After that is due. The caller holds mu.
func (c *Clock) fireLocked() {
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			w.ch <- c.now // buffered, sent once
		}
	}
	c.waiters = kept
}

// Option changes a fixture instance.
type Option func(*registry.Instance)

// WithStatus sets the instance's status.
func WithStatus(s registry.Status) Option { return func(in *registry.Instance) { in.Status = s } }

// WithRenewalInterval sets leaseInfo.renewalIntervalInSecs.
func WithRenewalInterval(secs int) Option {
	return func(in *registry.Instance) { in.RenewalIntervalSecs = secs }
}

// WithLeaseDuration sets leaseInfo.durationInSecs.
func WithLeaseDuration(secs int) Option {
	return func(in *registry.Instance) { in.LeaseDurationSecs = secs }
}

// WithDirty sets lastDirtyTimestamp (ms).
func WithDirty(ms int64) Option { return func(in *registry.Instance) { in.LastDirtyTimestamp = ms } }

// WithVIP sets vipAddress and secureVipAddress.
func WithVIP(vip string) Option {
	return func(in *registry.Instance) { in.VIPAddress, in.SecureVIPAddress = vip, vip }
}

// WithMetadata sets the metadata.
func WithMetadata(m map[string]string) Option {
	return func(in *registry.Instance) { in.Metadata = registry.NewMetadata(m) }
}

// NewInstance returns a valid UP instance of app, shaped like what a Spring
// client registers, with instance id id and a host name derived from it.
func NewInstance(app, id string, opts ...Option) *registry.Instance {
	host := fmt.Sprintf("host-%s", id)
	in := &registry.Instance{
		InstanceID:       id,
		HostName:         host,
		App:              app,
		IPAddr:           "10.0.0.1",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 443, Enabled: false},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
		VIPAddress:       app,
		SecureVIPAddress: app,
		HomePageURL:      "http://" + host + ":8080/",
		StatusPageURL:    "http://" + host + ":8080/actuator/info",
		HealthCheckURL:   "http://" + host + ":8080/actuator/health",
	}
	for _, o := range opts {
		o(in)
	}
	return in
}

// RandomChange applies one random write to r, on apps APP-0 … APP-(apps-1) and
// ids i-0 … i-29 with varied VIPs, statuses and metadata, or moves the
// clock and runs a periodic task (delta pruning, eviction): the driver of
// property tests that compare incremental reads with reads built from
// scratch. Errors of the registry (unknown instance and so on) are part of
// the game and ignored.
func RandomChange(r *registry.Registry, clk *Clock, rng *rand.Rand, apps int) {
	app := fmt.Sprintf("APP-%d", rng.IntN(apps))
	id := fmt.Sprintf("i-%d", rng.IntN(30))
	statuses := []registry.Status{registry.StatusUp, registry.StatusDown, registry.StatusOutOfService, registry.StatusStarting}
	switch k := rng.IntN(20); {
	case k < 7:
		opts := []Option{WithStatus(statuses[rng.IntN(len(statuses))]), WithVIP(fmt.Sprintf("vip-%d,shared", rng.IntN(3)))}
		if rng.IntN(2) == 0 {
			opts = append(opts, WithMetadata(map[string]string{"zone": fmt.Sprint(rng.IntN(3)), "a_b$c": "<&>\"'"}))
		}
		_, _ = r.Apply(registry.RegisterOp(NewInstance(app, id, opts...)))
	case k < 10:
		_, _ = r.Apply(registry.CancelOp(app, id))
	case k < 13:
		_, _ = r.Apply(registry.StatusOp(app, id, statuses[rng.IntN(len(statuses))]))
	case k < 14:
		_, _ = r.Apply(registry.DeleteOverrideOp(app, id, registry.StatusUp))
	case k < 15:
		_, _ = r.Apply(registry.MetadataOp(app, id, map[string]string{"v": fmt.Sprint(rng.IntN(100))}))
	case k < 18:
		clk.Advance(time.Duration(rng.IntN(2000)) * time.Millisecond)
		_, _ = r.Apply(registry.RenewOp(app, id))
	case k < 19:
		clk.Advance(time.Duration(rng.IntN(90)) * time.Second)
		r.PruneDeltas()
	default:
		clk.Advance(time.Duration(rng.IntN(120)) * time.Second)
		r.EvictExpired()
	}
}
