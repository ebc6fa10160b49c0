package registry

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rs/zerolog"
)

// Config holds every knob of the registry. Start from DefaultConfig; the
// defaults are Eureka's (DefaultEurekaServerConfig, EurekaServerConfigBean).
type Config struct {
	// Now is the clock. nil means time.Now. Tests pass a clock they move.
	Now func() time.Time
	// Rand picks which expired leases an eviction run removes when it may
	// not remove them all. nil means a randomly seeded source.
	Rand *rand.Rand
	// Logger receives state transitions (self-preservation on/off, evictions,
	// open for traffic). The zero value logs nothing.
	Logger zerolog.Logger

	// DefaultLeaseDuration is the lease of an instance that sends no
	// leaseInfo.durationInSecs. A lease expires at last renewal + duration
	// (not Eureka's doubled duration, EUREKA.md bug 1). Default 90 s.
	DefaultLeaseDuration time.Duration
	// ExpectedRenewalInterval is the heartbeat interval assumed for an
	// instance that sends no leaseInfo.renewalIntervalInSecs; such an
	// instance is expected to renew 60 s / interval times a minute.
	// eureka.server.expected-client-renewal-interval-seconds, default 30 s.
	ExpectedRenewalInterval time.Duration
	// RenewalPercentThreshold is the share of expected renewals below which
	// self-preservation stops eviction: threshold = ⌊expected × percent⌋.
	// It also caps each eviction run at size − ⌊size × percent⌋ instances.
	// eureka.server.renewal-percent-threshold, default 0.85.
	RenewalPercentThreshold float64
	// SelfPreservation enables self-preservation. When false, expired leases
	// are always evicted. eureka.server.enable-self-preservation, default true.
	SelfPreservation bool
	// EvictionInterval is how often Run evicts expired leases; a run that
	// comes late widens every lease by the delay, so clients are not
	// punished for the server's pause.
	// eureka.server.eviction-interval-timer-in-ms, default 60 s.
	EvictionInterval time.Duration
	// RenewThresholdUpdateInterval is how often Run recounts the expected
	// renewals from the registry. eureka.server.renewal-threshold-update-interval-ms,
	// default 15 min.
	RenewThresholdUpdateInterval time.Duration
	// RenewalRateWindow is the length of the window that counts renewals;
	// it slides in twelfths. Figures are still reported per minute (count ×
	// 1 min / window). Shorter windows react faster and suit chaos tests;
	// keep it under the lease duration so a mass outage is seen before the
	// dead leases can be evicted.
	// muster.measured-rate-window-ms, default 60 s, at least
	// MinRenewalRateWindow (1 s).
	RenewalRateWindow time.Duration
	// DeltaRetention is how long a change stays in the delta served by
	// GET /apps/delta. eureka.server.retention-time-in-m-s-in-delta-queue,
	// default 3 min.
	DeltaRetention time.Duration
	// DeltaRetentionInterval is how often Run prunes old changes from the
	// delta. eureka.server.delta-retention-timer-interval-in-ms, default 30 s.
	DeltaRetentionInterval time.Duration
	// SyncWhenTimestampDiffers turns on the lastDirtyTimestamp checks of a
	// heartbeat (404 "register again", 409 for peers).
	// eureka.server.sync-when-timestamp-differs, default true.
	SyncWhenTimestampDiffers bool
	// OutboxSize is how many changes the change stream keeps for its
	// consumers (rounded up to a power of two). A consumer that falls
	// further behind is told to resync from a snapshot rather than miss
	// changes (Cursor.Read). An event is ~80 bytes plus the instance it
	// shares with the registry. Default 16384: a full syncUp copy of 10k
	// instances fits, and replication reads it in microseconds.
	OutboxSize int

	// TombstoneGrace is how long a cancel's tombstone outlives the
	// cancelled instance's lease (tombstone.go): at least one
	// anti-entropy interval, so the cancel reaches every peer before the
	// tombstone goes. cmd/muster sets max(30 s, muster.anti-entropy-interval-ms).
	// Default 30 s.
	TombstoneGrace time.Duration
	// MaxTombstones bounds the tombstones kept; beyond it the one that
	// expires first is dropped (TombstoneStats.Dropped). Default 131072
	// (about 150 bytes each).
	MaxTombstones int
	// TombstoneMaxAge bounds how long a tombstone is held past its
	// lifetime while some peer has not been in sync since it was made
	// (SetTombstoneHold). muster.tombstone-max-age-ms, default 24 h.
	TombstoneMaxAge time.Duration
	// MaxEvictionHold bounds how long evictions are held back in a row
	// while a peer is unreachable (SetEvictionHold).
	// muster.eviction-hold-max-ms, default 15 min.
	MaxEvictionHold time.Duration

	// Limits bound what clients can make the node hold; see Limits.
	Limits Limits

	// ClusterNode reports whether an instance is one of the cluster's own
	// server nodes, registered as an instance of the server's application
	// (a node's self-registration, Spring's register-with-eureka, here or
	// replicated from a peer), rather than a client. Such an instance is
	// no client that must renew before reads open: its declared renewal
	// interval does not stretch a RefuseReadsUntilRenewed refusal nor
	// count in LongestRenewalInterval. It is called with the instance as
	// registered (App upper-cased). nil: every instance is a client.
	ClusterNode func(in *Instance) bool
}

// DefaultConfig returns Eureka's defaults.
func DefaultConfig() Config {
	return Config{
		DefaultLeaseDuration:         90 * time.Second,
		ExpectedRenewalInterval:      30 * time.Second,
		RenewalPercentThreshold:      0.85,
		SelfPreservation:             true,
		EvictionInterval:             60 * time.Second,
		RenewThresholdUpdateInterval: 15 * time.Minute,
		RenewalRateWindow:            60 * time.Second,
		DeltaRetention:               3 * time.Minute,
		DeltaRetentionInterval:       30 * time.Second,
		SyncWhenTimestampDiffers:     true,
		OutboxSize:                   16384,
		TombstoneGrace:               30 * time.Second,
		MaxTombstones:                1 << 17,
		TombstoneMaxAge:              24 * time.Hour,
		MaxEvictionHold:              15 * time.Minute,
		Limits:                       DefaultLimits(),
	}
}

// MinRenewalRateWindow is the shortest RenewalRateWindow: a window of a
// few heartbeats says nothing about whether clients are renewing.
const MinRenewalRateWindow = time.Second

// Validate reports the first knob that makes no sense, with its value, as
// an error naming the field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("registry: "+field+" "+format, args...)
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"DefaultLeaseDuration", c.DefaultLeaseDuration},
		{"ExpectedRenewalInterval", c.ExpectedRenewalInterval},
		{"EvictionInterval", c.EvictionInterval},
		{"RenewThresholdUpdateInterval", c.RenewThresholdUpdateInterval},
		{"RenewalRateWindow", c.RenewalRateWindow},
		{"DeltaRetention", c.DeltaRetention},
		{"DeltaRetentionInterval", c.DeltaRetentionInterval},
		{"TombstoneGrace", c.TombstoneGrace},
		{"TombstoneMaxAge", c.TombstoneMaxAge},
		{"MaxEvictionHold", c.MaxEvictionHold},
	}
	for _, p := range positive {
		if p.d <= 0 {
			return bad(p.name, "must be positive, got %s", p.d)
		}
	}
	if c.RenewalRateWindow < MinRenewalRateWindow {
		return bad("RenewalRateWindow", "must be at least %s, got %s", MinRenewalRateWindow, c.RenewalRateWindow)
	}
	if c.OutboxSize < 1 {
		return bad("OutboxSize", "must be at least 1, got %d", c.OutboxSize)
	}
	if c.MaxTombstones < 1 {
		return fmt.Errorf("registry: MaxTombstones must be at least 1, got %d", c.MaxTombstones)
	}
	if c.RenewalPercentThreshold <= 0 || c.RenewalPercentThreshold > 1 {
		return bad("RenewalPercentThreshold", "must be in (0, 1], got %v", c.RenewalPercentThreshold)
	}
	return c.Limits.validate()
}
