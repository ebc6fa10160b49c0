package client

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/muster-registry/muster/registry"
)

// Status is an instance's status, as Eureka spells it.
type Status string

// Eureka's five instance statuses.
const (
	StatusUp           Status = "UP"
	StatusDown         Status = "DOWN"
	StatusStarting     Status = "STARTING"
	StatusOutOfService Status = "OUT_OF_SERVICE"
	StatusUnknown      Status = "UNKNOWN"
)

func (s Status) valid() bool {
	switch s {
	case StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown:
		return true
	}
	return false
}

// Instance is one instance of an application, as a service registers it
// and as fetches and watches return it.
type Instance struct {
	// App is the application name. Eureka upper-cases it; fetched
	// instances carry the upper-case name.
	App string
	// ID is the instance id, unique within the app. Register fills an
	// empty one with Spring Cloud's default, "HostName:app:Port" (app in
	// lower case).
	ID string
	// HostName and IPAddr are where the instance is reached. Both are
	// required to register.
	HostName string
	IPAddr   string
	// Port is the plain port and SecurePort the TLS port; 0 means the port
	// is not enabled.
	Port       int
	SecurePort int
	// Status is the instance's status; empty means UP when registering.
	// A fetched instance shows the status the server resolved, overrides
	// included.
	Status Status
	// Zone is the instance's zone: metadata "zone" (what Spring Cloud's
	// zone affinity reads) or, for AWS instances, the availability zone.
	// When registering, a non-empty Zone is written as metadata "zone".
	Zone string
	// Metadata is the instance's free-form metadata map.
	Metadata map[string]string

	// VIPAddress and SecureVIPAddress are the virtual host names clients
	// look the instance up by; Register defaults them to App in lower case.
	VIPAddress       string
	SecureVIPAddress string
	// HomePageURL, StatusPageURL and HealthCheckURL are shown on dashboards
	// and used by health checkers; optional.
	HomePageURL    string
	StatusPageURL  string
	HealthCheckURL string

	// RenewalInterval is how often a registration sends a heartbeat, and
	// LeaseDuration how long the server keeps the instance without one
	// (leaseInfo, whole seconds on the wire). 0 means Eureka's 30 s and
	// 90 s.
	RenewalInterval time.Duration
	LeaseDuration   time.Duration
}

// Eureka's lease defaults (eureka.instance.lease-renewal-interval-in-seconds
// and lease-expiration-duration-in-seconds).
const (
	DefaultRenewalInterval = 30 * time.Second
	DefaultLeaseDuration   = 90 * time.Second
)

// withDefaults fills what Register fills in.
func (in Instance) withDefaults() Instance {
	in.App = strings.ToUpper(in.App)
	if in.ID == "" {
		in.ID = in.HostName + ":" + strings.ToLower(in.App) + ":" + strconv.Itoa(in.Port)
	}
	if in.Status == "" {
		in.Status = StatusUp
	}
	if in.VIPAddress == "" {
		in.VIPAddress = strings.ToLower(in.App)
	}
	if in.SecureVIPAddress == "" {
		in.SecureVIPAddress = strings.ToLower(in.App)
	}
	if in.RenewalInterval <= 0 {
		in.RenewalInterval = DefaultRenewalInterval
	}
	if in.LeaseDuration <= 0 {
		in.LeaseDuration = DefaultLeaseDuration
	}
	in.Metadata = maps.Clone(in.Metadata)
	return in
}

// wireInstance is what goes into a register body: the instance with the
// given lastDirtyTimestamp (ms).
func (in Instance) wireInstance(lastDirty int64) *registry.Instance {
	md := maps.Clone(in.Metadata)
	if in.Zone != "" {
		if md == nil {
			md = map[string]string{}
		}
		md["zone"] = in.Zone
	}
	return &registry.Instance{
		InstanceID:           in.ID,
		HostName:             in.HostName,
		App:                  in.App,
		IPAddr:               in.IPAddr,
		Status:               registry.Status(in.Status),
		OverriddenStatus:     registry.StatusUnknown,
		Port:                 registry.Port{Number: in.Port, Enabled: in.Port > 0},
		SecurePort:           registry.Port{Number: in.SecurePort, Enabled: in.SecurePort > 0},
		CountryID:            1,
		DataCenterInfo:       registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
		RenewalIntervalSecs:  wholeSeconds(in.RenewalInterval),
		LeaseDurationSecs:    wholeSeconds(in.LeaseDuration),
		Metadata:             registry.NewMetadata(md),
		HomePageURL:          in.HomePageURL,
		StatusPageURL:        in.StatusPageURL,
		HealthCheckURL:       in.HealthCheckURL,
		VIPAddress:           in.VIPAddress,
		SecureVIPAddress:     in.SecureVIPAddress,
		LastUpdatedTimestamp: lastDirty,
		LastDirtyTimestamp:   lastDirty,
		ActionType:           registry.ActionAdded,
	}
}

func wholeSeconds(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

// fromWire converts a decoded instance. Strings are copied: a decoded
// document's strings share its whole body, which one kept instance would
// otherwise keep alive.
func fromWire(app string, in *registry.Instance) Instance {
	out := Instance{
		App:              strings.Clone(in.App),
		ID:               strings.Clone(in.ID()),
		HostName:         strings.Clone(in.HostName),
		IPAddr:           strings.Clone(in.IPAddr),
		Status:           Status(in.Status),
		VIPAddress:       strings.Clone(in.VIPAddress),
		SecureVIPAddress: strings.Clone(in.SecureVIPAddress),
		HomePageURL:      strings.Clone(in.HomePageURL),
		StatusPageURL:    strings.Clone(in.StatusPageURL),
		HealthCheckURL:   strings.Clone(in.HealthCheckURL),
		RenewalInterval:  time.Duration(in.RenewalIntervalSecs) * time.Second,
		LeaseDuration:    time.Duration(in.LeaseDurationSecs) * time.Second,
	}
	if out.App == "" {
		out.App = strings.ToUpper(strings.Clone(app))
	}
	if in.Port.Enabled {
		out.Port = in.Port.Number
	}
	if in.SecurePort.Enabled {
		out.SecurePort = in.SecurePort.Number
	}
	if len(in.Metadata) > 0 {
		out.Metadata = make(map[string]string, len(in.Metadata))
		for _, kv := range in.Metadata {
			out.Metadata[strings.Clone(kv.Key)] = strings.Clone(kv.Value)
		}
	}
	out.Zone = out.Metadata["zone"]
	if out.Zone == "" && in.DataCenterInfo.Name == "Amazon" {
		az, _ := in.DataCenterInfo.Metadata.Get("availability-zone")
		out.Zone = strings.Clone(az)
	}
	return out
}

// equal reports whether two instances have the same content.
func (in Instance) equal(o Instance) bool {
	return in.App == o.App && in.ID == o.ID && in.HostName == o.HostName && in.IPAddr == o.IPAddr &&
		in.Port == o.Port && in.SecurePort == o.SecurePort && in.Status == o.Status && in.Zone == o.Zone &&
		in.VIPAddress == o.VIPAddress && in.SecureVIPAddress == o.SecureVIPAddress &&
		in.HomePageURL == o.HomePageURL && in.StatusPageURL == o.StatusPageURL && in.HealthCheckURL == o.HealthCheckURL &&
		in.RenewalInterval == o.RenewalInterval && in.LeaseDuration == o.LeaseDuration &&
		maps.Equal(in.Metadata, o.Metadata)
}

// sortInstances orders instances by id, the order Muster lists them in.
func sortInstances(list []Instance) {
	slices.SortFunc(list, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
}

func equalInstances(a, b []Instance) bool {
	return slices.EqualFunc(a, b, Instance.equal)
}

// clone returns a copy that shares nothing mutable with in.
func (in Instance) clone() Instance {
	in.Metadata = maps.Clone(in.Metadata)
	return in
}
