package registry

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Limits bound what clients (and peers, which relay clients' writes) can
// make one node hold. The defaults are far above what a large deployment
// uses, so that only a runaway or hostile client meets them; every write
// beyond one is refused whole and counted (LimitRejections).
type Limits struct {
	// MaxInstances caps the instances of the whole node. A registration of
	// a new instance beyond it gets ErrCapacity (503: try later or another
	// node). muster.max-instances, default 1,000,000.
	MaxInstances int
	// MaxInstancesPerApp caps the instances of one app; a new instance
	// beyond it gets ErrAppFull (403). muster.max-instances-per-app,
	// default 100,000.
	MaxInstancesPerApp int
	// MaxMetadataEntries caps an instance's metadata entries (metadata and
	// dataCenterInfo metadata each). muster.max-metadata-entries, default 512.
	MaxMetadataEntries int
	// MaxMetadataBytes caps the bytes of an instance's metadata keys and
	// values (metadata and dataCenterInfo metadata together).
	// muster.max-metadata-bytes, default 65536.
	MaxMetadataBytes int
	// MaxNameLength caps, in bytes, the app name, the instance id, the host
	// name, the VIP addresses and every other single-valued string of an
	// instance (ipAddr, sid, URLs, group and ASG names).
	// muster.max-name-length, default 1024.
	MaxNameLength int
	// MaxClockSkew is how far in the future a lastDirtyTimestamp may be.
	// The newest lastDirtyTimestamp wins between copies of an instance, so
	// one far in the future would pin a record against every later
	// registration of its owner; such a write gets ErrClockSkew (400).
	// A value within the skew can hold a record at most that long.
	// muster.max-clock-skew-ms, default 5 min (Kerberos' default skew).
	MaxClockSkew time.Duration
	// MaxPersistentPerApp caps the persistent instances of one app
	// (persistent.go); a client's registration of one more gets
	// ErrPersistentFull (403). 0: none may be registered.
	// muster.max-persistent-per-app, default 100.
	MaxPersistentPerApp int
	// MaxPersistentPerUser caps the persistent instances one user
	// registered through this node (anonymous clients count as one user);
	// one more gets ErrPersistentFull (403). 0: none.
	// muster.max-persistent-per-user, default 1000.
	MaxPersistentPerUser int
}

// DefaultLimits returns the defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxInstances:       1_000_000,
		MaxInstancesPerApp: 100_000,
		MaxMetadataEntries: 512,
		MaxMetadataBytes:   64 << 10,
		MaxNameLength:      1024,
		MaxClockSkew:       5 * time.Minute,

		MaxPersistentPerApp:  100,
		MaxPersistentPerUser: 1000,
	}
}

func (l Limits) validate() error {
	for _, p := range []struct {
		name   string
		v, max int
	}{
		{"MaxInstances", l.MaxInstances, 1_000_000_000},
		{"MaxInstancesPerApp", l.MaxInstancesPerApp, 1_000_000_000},
		{"MaxMetadataEntries", l.MaxMetadataEntries, 1_000_000},
		{"MaxMetadataBytes", l.MaxMetadataBytes, 1 << 30},
		{"MaxNameLength", l.MaxNameLength, 1 << 20},
	} {
		if p.v <= 0 || p.v > p.max {
			return fmt.Errorf("registry: Limits.%s must be from 1 to %d, got %d", p.name, p.max, p.v)
		}
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"MaxPersistentPerApp", l.MaxPersistentPerApp}, {"MaxPersistentPerUser", l.MaxPersistentPerUser}} {
		if p.v < 0 || p.v > 1_000_000_000 {
			return fmt.Errorf("registry: Limits.%s must be from 0 to 1000000000, got %d", p.name, p.v)
		}
	}
	if l.MaxClockSkew <= 0 {
		return fmt.Errorf("registry: Limits.MaxClockSkew must be positive, got %s", l.MaxClockSkew)
	}
	return nil
}

// Lease fields beyond these are clamped on registration: a lease of
// Integer.MAX_VALUE seconds (68 years) would keep a dead instance forever,
// and an interval beyond the lease makes no sense. The values match the
// ranges of the node's own eureka.instance.lease-* settings.
const (
	MaxRenewalIntervalSecs = 3600  // 1 h
	MaxLeaseDurationSecs   = 86400 // 24 h
)

// Limit names a limit, as the error text and the rejection metric show it
// (the config key without "muster.").
type Limit string

// The limits the registry enforces.
const (
	LimitInstances         Limit = "max-instances"
	LimitInstancesPerApp   Limit = "max-instances-per-app"
	LimitMetadataEntries   Limit = "max-metadata-entries"
	LimitMetadataBytes     Limit = "max-metadata-bytes"
	LimitNameLength        Limit = "max-name-length"
	LimitClockSkew         Limit = "max-clock-skew-ms"
	LimitPersistentPerApp  Limit = "max-persistent-per-app"
	LimitPersistentPerUser Limit = "max-persistent-per-user"
)

// RegistryLimits lists the limits the registry counts, in a fixed order.
var RegistryLimits = []Limit{LimitInstances, LimitInstancesPerApp, LimitMetadataEntries, LimitMetadataBytes, LimitNameLength, LimitClockSkew,
	LimitPersistentPerApp, LimitPersistentPerUser}

// Errors of a write refused by a limit; all wrap ErrLimitExceeded (and so
// does ErrPersistentFull, persistent.go).
var (
	// ErrLimitExceeded: a field of the write is beyond a limit (400).
	ErrLimitExceeded = errors.New("registry: limit exceeded")
	// ErrCapacity: the node holds MaxInstances already (503).
	ErrCapacity = fmt.Errorf("%w: node at capacity", ErrLimitExceeded)
	// ErrAppFull: the app holds MaxInstancesPerApp already (403).
	ErrAppFull = fmt.Errorf("%w: app at capacity", ErrLimitExceeded)
	// ErrClockSkew: a lastDirtyTimestamp is too far in the future (400).
	ErrClockSkew = fmt.Errorf("%w: lastDirtyTimestamp in the future", ErrLimitExceeded)
)

// LimitError is a write refused by a limit. Its text names the limit by
// its config key and quotes no more than a short prefix of the value.
type LimitError struct {
	Limit  Limit
	Detail string
	kind   error
}

func (e *LimitError) Error() string {
	return e.kind.Error() + ": " + e.Detail + " (muster." + string(e.Limit) + ")"
}

func (e *LimitError) Unwrap() error { return e.kind }

// limitCounters counts refused writes per limit, for metrics.
type limitCounters [8]atomic.Uint64

func limitIndex(l Limit) int {
	for i, x := range RegistryLimits {
		if x == l {
			return i
		}
	}
	return -1
}

// LimitRejections returns how many writes each limit refused since start.
func (r *Registry) LimitRejections() map[Limit]uint64 {
	out := make(map[Limit]uint64, len(RegistryLimits))
	for i, l := range RegistryLimits {
		out[l] = r.limitHits[i].Load()
	}
	return out
}

func (r *Registry) refuse(l Limit, kind error, format string, args ...any) error {
	if i := limitIndex(l); i >= 0 {
		r.limitHits[i].Add(1)
	}
	return &LimitError{Limit: l, Detail: fmt.Sprintf(format, args...), kind: kind}
}

// checkInstanceLimits checks the parts of an instance that do not depend
// on the registry's content: name lengths, metadata and lastDirtyTimestamp.
func (r *Registry) checkInstanceLimits(in *Instance, now time.Time) error {
	lim := r.cfg.Limits
	for _, f := range []struct{ name, v string }{
		{"app", in.App}, {"instanceId", in.ID()}, {"hostName", in.HostName}, {"vipAddress", in.VIPAddress},
		{"secureVipAddress", in.SecureVIPAddress}, {"ipAddr", in.IPAddr}, {"sid", in.Sid},
		{"appGroupName", in.AppGroupName}, {"asgName", in.ASGName}, {"homePageUrl", in.HomePageURL},
		{"statusPageUrl", in.StatusPageURL}, {"healthCheckUrl", in.HealthCheckURL},
		{"secureHealthCheckUrl", in.SecureHealthCheckURL}, {"dataCenterInfo.name", in.DataCenterInfo.Name},
	} {
		if len(f.v) > lim.MaxNameLength {
			return r.refuse(LimitNameLength, ErrLimitExceeded, "%s %s is %d bytes, more than %d",
				f.name, QuotePrefix(f.v), len(f.v), lim.MaxNameLength)
		}
	}
	if err := r.checkMetadata(in.Metadata, in.DataCenterInfo.Metadata); err != nil {
		return err
	}
	return r.checkDirtySkew(in.LastDirtyTimestamp, now)
}

// checkMetadata checks metadata entries and bytes.
func (r *Registry) checkMetadata(mds ...Metadata) error {
	lim := r.cfg.Limits
	size := 0
	for _, md := range mds {
		if len(md) > lim.MaxMetadataEntries {
			return r.refuse(LimitMetadataEntries, ErrLimitExceeded, "metadata has %d entries, more than %d", len(md), lim.MaxMetadataEntries)
		}
		for _, kv := range md {
			size += len(kv.Key) + len(kv.Value)
		}
	}
	if size > lim.MaxMetadataBytes {
		return r.refuse(LimitMetadataBytes, ErrLimitExceeded, "metadata is %d bytes, more than %d", size, lim.MaxMetadataBytes)
	}
	return nil
}

// checkDirtySkew refuses a lastDirtyTimestamp (ms) more than MaxClockSkew
// ahead of now; 0 means none was sent.
func (r *Registry) checkDirtySkew(ms int64, now time.Time) error {
	if ms == 0 {
		return nil
	}
	if ahead := time.Duration(ms-now.UnixMilli()) * time.Millisecond; ms > now.Add(r.cfg.Limits.MaxClockSkew).UnixMilli() {
		return r.refuse(LimitClockSkew, ErrClockSkew, "lastDirtyTimestamp %d is %s ahead of this node's clock, more than %s",
			ms, ahead.Round(time.Second), r.cfg.Limits.MaxClockSkew)
	}
	return nil
}

// checkVersionSkew refuses a peer's write version whose time is more than
// MaxClockSkew ahead of this node's clock. Observing it would drag this
// node's clock along (every later write here would carry that future
// time, and beat real later writes of nodes that have not seen it), and a
// version near the maximum would wrap the clock to 0. The writer keeps
// its copy; the others take it once their clocks are within the skew.
func (r *Registry) checkVersionSkew(v uint64, now time.Time) error {
	limit := uint64(max(now.Add(r.cfg.Limits.MaxClockSkew).UnixMilli(), 0))<<16 | 0xffff
	if v <= limit {
		return nil
	}
	return r.refuse(LimitClockSkew, ErrClockSkew, "write version %d (%s) is more than %s ahead of this node's clock",
		v, VersionTime(v).UTC().Format(time.RFC3339), r.cfg.Limits.MaxClockSkew)
}

// checkCapacityLocked refuses a new instance of app beyond the instance
// limits. Re-registrations of a known instance always pass.
func (r *Registry) checkCapacityLocked(app string) error {
	lim := r.cfg.Limits
	if r.instances >= lim.MaxInstances {
		return r.refuse(LimitInstances, ErrCapacity, "the node holds %d instances", r.instances)
	}
	if n := len(r.apps[app].all()); n >= lim.MaxInstancesPerApp {
		return r.refuse(LimitInstancesPerApp, ErrAppFull, "app %s holds %d instances", QuotePrefix(app), n)
	}
	return nil
}

// clampLease bounds the client's lease fields (see MaxLeaseDurationSecs).
func clampLease(in *Instance) {
	in.RenewalIntervalSecs = min(in.RenewalIntervalSecs, MaxRenewalIntervalSecs)
	in.LeaseDurationSecs = min(in.LeaseDurationSecs, MaxLeaseDurationSecs)
}

// QuotePrefix quotes s for an error message, cut to its first 64 bytes, so
// that a huge value cannot make a huge error body or log line.
func QuotePrefix(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return strconv.Quote(s)
	}
	cut := maxLen
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
