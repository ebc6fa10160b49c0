package registry

import (
	"fmt"
	"sort"
	"strings"
)

// Status is an instance's status as Eureka spells it on the wire.
type Status string

// The five statuses of Eureka's InstanceInfo.InstanceStatus.
const (
	StatusUp           Status = "UP"
	StatusDown         Status = "DOWN"
	StatusStarting     Status = "STARTING"
	StatusOutOfService Status = "OUT_OF_SERVICE"
	StatusUnknown      Status = "UNKNOWN"
)

// ParseStatus accepts the five status names in any letter case. Eureka's
// resources use Enum.valueOf, so a lower-case or unknown value becomes a 500
// there (EUREKA.md bug 13); here it is ErrInvalidStatus, which the HTTP layer
// answers with 400.
func ParseStatus(s string) (Status, error) {
	// Return the constants, never s itself: a status decoded from a request
	// body must not keep that body alive.
	switch Status(strings.ToUpper(s)) {
	case StatusUp:
		return StatusUp, nil
	case StatusDown:
		return StatusDown, nil
	case StatusStarting:
		return StatusStarting, nil
	case StatusOutOfService:
		return StatusOutOfService, nil
	case StatusUnknown:
		return StatusUnknown, nil
	}
	return "", fmt.Errorf("%w: %s (want UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN)", ErrInvalidStatus, QuotePrefix(s))
}

// check returns ErrInvalidStatus unless s is one of the five statuses,
// spelled exactly.
func (s Status) check() error {
	switch s {
	case StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidStatus, QuotePrefix(string(s)))
}

// LenientStatus maps a status read from a stored or peer-sent instance body:
// unknown names become UNKNOWN, as Eureka's InstanceInfoDeserializer does.
// Use ParseStatus for values a client asks the server to set.
func LenientStatus(s string) Status {
	st, err := ParseStatus(s)
	if err != nil {
		return StatusUnknown
	}
	return st
}

// ActionType records what last happened to an instance, as shown in deltas.
type ActionType string

// Eureka's InstanceInfo.ActionType values.
const (
	ActionAdded    ActionType = "ADDED"
	ActionModified ActionType = "MODIFIED"
	ActionDeleted  ActionType = "DELETED"
)

// Port is a port number and whether it is enabled (Eureka's `port` and
// `securePort` elements).
type Port struct {
	Number  int
	Enabled bool
}

// KV is one metadata entry.
type KV struct {
	Key, Value string
}

// Metadata is a string map kept as a slice sorted by key: it costs far less
// memory than a Go map for the handful of entries an instance carries, and
// it gives every encoder the same deterministic order.
type Metadata []KV

// NewMetadata builds sorted Metadata from a map.
func NewMetadata(m map[string]string) Metadata {
	if len(m) == 0 {
		return nil
	}
	md := make(Metadata, 0, len(m))
	for k, v := range m {
		md = append(md, KV{k, v})
	}
	sort.Slice(md, func(i, j int) bool { return md[i].Key < md[j].Key })
	return md
}

// Get returns the value for key and whether it is present.
func (md Metadata) Get(key string) (string, bool) {
	i := sort.Search(len(md), func(i int) bool { return md[i].Key >= key })
	if i < len(md) && md[i].Key == key {
		return md[i].Value, true
	}
	return "", false
}

// With returns a copy of md with the given entries set (added or replaced).
// md itself is never modified, because stored instances are immutable.
func (md Metadata) With(updates map[string]string) Metadata {
	m := make(map[string]string, len(md)+len(updates))
	for _, kv := range md {
		m[kv.Key] = kv.Value
	}
	for k, v := range updates {
		m[k] = v
	}
	return NewMetadata(m)
}

// Class names of dataCenterInfo that Eureka's Jackson codec writes as @class.
const (
	DataCenterClassDefault = "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"
	DataCenterClassAmazon  = "com.netflix.appinfo.AmazonInfo"
)

// DataCenterInfo says where an instance runs: Name is MyOwn, Netflix or
// Amazon; Amazon instances carry EC2 metadata such as instance-id and
// availability-zone.
type DataCenterInfo struct {
	Class    string
	Name     string
	Metadata Metadata
}

// Instance is one registered instance, Eureka's InstanceInfo. A stored
// *Instance is immutable: the registry replaces it with a modified copy
// instead of changing it, so snapshots, deltas and replication tasks can
// share it without locks.
type Instance struct {
	InstanceID       string
	HostName         string
	App              string // upper-cased application name
	IPAddr           string
	Sid              string
	Status           Status
	OverriddenStatus Status
	Port             Port
	SecurePort       Port
	CountryID        int
	DataCenterInfo   DataCenterInfo

	// RenewalIntervalSecs and LeaseDurationSecs are the client's
	// leaseInfo.renewalIntervalInSecs and durationInSecs; 0 means the client
	// sent none, and the registry's defaults apply.
	RenewalIntervalSecs int
	LeaseDurationSecs   int

	Metadata Metadata

	AppGroupName                  string
	HomePageURL                   string
	StatusPageURL                 string
	HealthCheckURL                string
	SecureHealthCheckURL          string
	VIPAddress                    string
	SecureVIPAddress              string
	ASGName                       string
	IsCoordinatingDiscoveryServer bool

	LastUpdatedTimestamp int64 // ms since epoch, Eureka wire
	LastDirtyTimestamp   int64 // ms since epoch, Eureka wire; set by the client
	ActionType           ActionType

	// Lease timestamps, stamped by the registry (ms since epoch, Eureka wire;
	// 0 = not yet). The last renewal changes on every heartbeat, so it is not
	// kept here but in InstanceView, next to the instance it belongs to.
	RegistrationTimestamp int64
	EvictionTimestamp     int64
	ServiceUpTimestamp    int64

	// WriteVersion orders registrations of this instance across nodes: the
	// hybrid-logical-clock version (hlc.go) of the client's registration
	// in this copy, stamped by the node that accepted it. Between Muster
	// nodes the higher version's registration wins (replication, syncUp,
	// anti-entropy), and a cancel's tombstone beats every copy whose
	// registration is not newer; 0 means unknown (a copy from a Java
	// Eureka peer), which any versioned copy beats. The other pieces
	// (override, metadata writes, health mark) carry their own versions in
	// Pieces. Never shown to Eureka clients.
	WriteVersion uint64

	// Pieces holds the other writers' pieces and their versions
	// (pieces.go); nil for an instance that only ever had a registration.
	// Travels between Muster nodes beside the instance; never shown to
	// Eureka clients.
	Pieces *Pieces

	// Health is the server-owned status the health checks set (health.go):
	// nil while the instance is not marked failing. While it hides a UP
	// status, Status is DOWN. Travels between Muster nodes beside the
	// instance, like WriteVersion; never shown to Eureka clients as a field.
	Health *HealthMark
}

// ID is the effective instance id, as Eureka's InstanceInfo.getId computes
// it: instanceId if set, else the EC2 instance-id of an Amazon
// dataCenterInfo, else the host name.
func (in *Instance) ID() string {
	if in.InstanceID != "" {
		return in.InstanceID
	}
	if in.DataCenterInfo.Name == "Amazon" {
		if id, ok := in.DataCenterInfo.Metadata.Get("instance-id"); ok && id != "" {
			return id
		}
	}
	return in.HostName
}

// Clone returns a shallow copy; slices are shared, which is safe because
// nothing modifies them in place.
func (in *Instance) Clone() *Instance {
	c := *in
	return &c
}

// Validate applies Eureka's register checks, in Eureka's order
// (ApplicationResource#addInstance), and returns ErrInvalidInstance with the
// first failure.
func (in *Instance) Validate() error {
	switch {
	case strings.TrimSpace(in.ID()) == "":
		return invalid("missing instanceId")
	case strings.TrimSpace(in.HostName) == "":
		return invalid("missing hostName")
	case strings.TrimSpace(in.IPAddr) == "":
		return invalid("missing ip address")
	case strings.TrimSpace(in.App) == "":
		return invalid("missing appName")
	case in.DataCenterInfo.Name == "":
		return invalid("missing dataCenterInfo name")
	}
	if in.Status.check() != nil {
		return invalid("invalid status " + QuotePrefix(string(in.Status)))
	}
	if in.OverriddenStatus != "" && in.OverriddenStatus.check() != nil {
		return invalid("invalid overriddenStatus " + QuotePrefix(string(in.OverriddenStatus)))
	}
	if in.RenewalIntervalSecs < 0 || in.LeaseDurationSecs < 0 {
		return invalid("negative leaseInfo interval or duration")
	}
	return checkLeaseMarker(in.Metadata)
}

func invalid(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidInstance, msg) }

// InstanceKey names an instance: upper-cased app name and instance id.
type InstanceKey struct {
	App, ID string
}

func (k InstanceKey) String() string { return k.App + "/" + k.ID }

// upperASCII returns strings.ToUpper(s) (the codecs upper-case app names
// the same way), without allocating when s is upper-case ASCII already:
// the usual case, and this runs on every heartbeat.
func upperASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'a' <= c && c <= 'z' || c >= 0x80 {
			return strings.ToUpper(s)
		}
	}
	return s
}
