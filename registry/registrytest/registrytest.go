// Package registrytest holds test helpers for code built on the registry: a
// clock that tests move by hand, and instance fixtures.
package registrytest

import (
	"fmt"
	"sync"
	"time"

	"github.com/muster-registry/muster/registry"
)

// Clock is a manual clock. Its zero value starts at a fixed, readable date;
// it only moves when Advance or Set is called. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
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
	return c.now
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
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
