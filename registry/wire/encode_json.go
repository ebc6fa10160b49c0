package wire

import (
	"slices"
	"strconv"

	"github.com/muster-registry/muster/registry"
)

// Class names and defaults that Eureka writes but the registry does not
// store.
const (
	emptyMapClass = "java.util.Collections$EmptyMap"

	// defaultRenewalIntervalSecs and defaultLeaseDurationSecs stand in for
	// an instance that sent no leaseInfo, as the defaults of Eureka's
	// LeaseInfo.Builder do when AbstractInstanceRegistry#decorateInstanceInfo
	// rebuilds leaseInfo for every read.
	defaultRenewalIntervalSecs = 30
	defaultLeaseDurationSecs   = 90
)

// AppendApplicationsJSON appends an applications document (a full registry,
// a delta or a VIP lookup) in Eureka's JSON shape:
// {"applications":{"versions__delta":…,"apps__hashcode":…,"application":[…]}}.
// application is always an array, empty for no apps.
func AppendApplicationsJSON(b []byte, apps []registry.AppView, versionsDelta, hashcode string) []byte {
	b = slices.Grow(b, estimateApps(apps, false)+len(versionsDelta)+len(hashcode)+96)
	b = AppendApplicationsHeaderJSON(b, versionsDelta, hashcode)
	for i, app := range apps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendApplicationBodyJSON(b, app)
	}
	return append(b, ApplicationsFooterJSON...)
}

// An applications document is, byte for byte, its header, its apps' bodies
// (AppendApplicationBodyJSON) separated by commas, and the footer: the
// pieces an incremental encoder caches per app and joins.

// AppendApplicationsHeaderJSON appends the start of an applications
// document, up to and including the application array's '['.
func AppendApplicationsHeaderJSON(b []byte, versionsDelta, hashcode string) []byte {
	b = append(b, `{"applications":{"versions__delta":`...)
	b = appendJSONString(b, versionsDelta)
	b = append(b, `,"apps__hashcode":`...)
	b = appendJSONString(b, hashcode)
	return append(b, `,"application":[`...)
}

// ApplicationsFooterJSON ends an applications document.
const ApplicationsFooterJSON = "]}}"

// AppendApplicationBodyJSON appends one application object
// {"name":…,"instance":[…]} as it appears in an applications document's
// application array (and, wrapped, as a single application).
func AppendApplicationBodyJSON(b []byte, app registry.AppView) []byte {
	b = slices.Grow(b, estimateApp(app, false))
	return appendApplicationBodyJSON(b, app)
}

// AppendApplicationJSON appends one application: {"application":{"name":…,
// "instance":[…]}}. instance is always an array.
func AppendApplicationJSON(b []byte, app registry.AppView) []byte {
	b = slices.Grow(b, estimateApp(app, false)+24)
	b = append(b, `{"application":`...)
	b = appendApplicationBodyJSON(b, app)
	return append(b, '}')
}

// AppendInstanceJSON appends one instance in its wrapper: {"instance":{…}}.
func AppendInstanceJSON(b []byte, iv registry.InstanceView) []byte {
	b = append(b, `{"instance":`...)
	b = AppendInstanceBodyJSON(b, iv)
	return append(b, '}')
}

// AppendInstanceBodyJSON appends one instance object without the instance
// wrapper, as the peer replication batch carries it (instanceInfo) and as a
// 409 answer to a replicated heartbeat returns it (responseEntity).
func AppendInstanceBodyJSON(b []byte, iv registry.InstanceView) []byte {
	if iv.Instance == nil {
		return append(b, "null"...)
	}
	return appendInstanceBodyJSON(b, iv)
}

func appendApplicationBodyJSON(b []byte, app registry.AppView) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, app.Name)
	b = append(b, `,"instance":[`...)
	first := true
	for _, iv := range app.Instances {
		if iv.Instance == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendInstanceBodyJSON(b, iv)
	}
	return append(b, "]}"...)
}

// appendInstanceBodyJSON writes the fields in the order of Eureka's
// EurekaJacksonCodec.InstanceInfoSerializer: identity, status, ports,
// countryId, dataCenterInfo, leaseInfo, metadata, then the @Auto fields of
// InstanceInfo in declaration order, as strings.
func appendInstanceBodyJSON(b []byte, iv registry.InstanceView) []byte {
	in := iv.Instance
	if in.InstanceID != "" {
		b = append(b, `{"instanceId":`...)
		b = appendJSONString(b, in.InstanceID)
		b = append(b, `,"hostName":`...)
	} else {
		b = append(b, `{"hostName":`...)
	}
	b = appendJSONString(b, in.HostName)
	b = append(b, `,"app":`...)
	b = appendJSONString(b, in.App)
	b = append(b, `,"ipAddr":`...)
	b = appendJSONString(b, in.IPAddr)
	if sidVisible(in.Sid) {
		b = append(b, `,"sid":`...)
		b = appendJSONString(b, in.Sid)
	}
	b = append(b, `,"status":`...)
	b = appendJSONString(b, statusName(in.Status))
	b = append(b, `,"overriddenStatus":`...)
	b = appendJSONString(b, statusName(in.OverriddenStatus))

	b = append(b, `,"port":{"$":`...)
	b = strconv.AppendInt(b, int64(in.Port.Number), 10)
	b = appendEnabledJSON(b, in.Port.Enabled)
	b = append(b, `,"securePort":{"$":`...)
	b = strconv.AppendInt(b, int64(in.SecurePort.Number), 10)
	b = appendEnabledJSON(b, in.SecurePort.Enabled)
	b = append(b, `,"countryId":`...)
	b = strconv.AppendInt(b, int64(in.CountryID), 10)

	if dc := in.DataCenterInfo; dc.Name != "" {
		b = append(b, `,"dataCenterInfo":{"@class":`...)
		b = appendJSONString(b, dataCenterClass(dc))
		b = append(b, `,"name":`...)
		b = appendJSONString(b, dc.Name)
		if dc.Name == dataCenterAmazon {
			// Jackson writes AmazonInfo's metadata as a plain map, so an
			// empty one is {} here, unlike the instance metadata below.
			b = append(b, `,"metadata":{`...)
			b = appendMetadataEntriesJSON(b, dc.Metadata)
			b = append(b, '}')
		}
		b = append(b, '}')
	}

	b = append(b, `,"leaseInfo":{"renewalIntervalInSecs":`...)
	b = strconv.AppendInt(b, int64(orDefault(in.RenewalIntervalSecs, defaultRenewalIntervalSecs)), 10)
	b = append(b, `,"durationInSecs":`...)
	b = strconv.AppendInt(b, int64(orDefault(in.LeaseDurationSecs, defaultLeaseDurationSecs)), 10)
	b = append(b, `,"registrationTimestamp":`...)
	b = strconv.AppendInt(b, in.RegistrationTimestamp, 10)
	b = append(b, `,"lastRenewalTimestamp":`...)
	b = strconv.AppendInt(b, iv.LastRenewalTimestamp, 10)
	b = append(b, `,"evictionTimestamp":`...)
	b = strconv.AppendInt(b, in.EvictionTimestamp, 10)
	b = append(b, `,"serviceUpTimestamp":`...)
	b = strconv.AppendInt(b, in.ServiceUpTimestamp, 10)
	b = append(b, '}')

	if len(in.Metadata) == 0 {
		// Eureka's serializer writes an empty map with this marker "for
		// backwards compatibility" (InstanceInfoSerializer.EMPTY_METADATA).
		b = append(b, `,"metadata":{"@class":"`+emptyMapClass+`"}`...)
	} else {
		b = append(b, `,"metadata":{`...)
		b = appendMetadataEntriesJSON(b, in.Metadata)
		b = append(b, '}')
	}

	b = appendOptionalJSON(b, `,"appGroupName":`, in.AppGroupName)
	b = appendOptionalJSON(b, `,"homePageUrl":`, in.HomePageURL)
	b = appendOptionalJSON(b, `,"statusPageUrl":`, in.StatusPageURL)
	b = appendOptionalJSON(b, `,"healthCheckUrl":`, in.HealthCheckURL)
	b = appendOptionalJSON(b, `,"secureHealthCheckUrl":`, in.SecureHealthCheckURL)
	b = appendOptionalJSON(b, `,"vipAddress":`, in.VIPAddress)
	b = appendOptionalJSON(b, `,"secureVipAddress":`, in.SecureVIPAddress)
	if in.IsCoordinatingDiscoveryServer {
		b = append(b, `,"isCoordinatingDiscoveryServer":"true"`...)
	} else {
		b = append(b, `,"isCoordinatingDiscoveryServer":"false"`...)
	}
	b = append(b, `,"lastUpdatedTimestamp":"`...)
	b = strconv.AppendInt(b, in.LastUpdatedTimestamp, 10)
	b = append(b, `","lastDirtyTimestamp":"`...)
	b = strconv.AppendInt(b, in.LastDirtyTimestamp, 10)
	b = append(b, '"')
	b = appendOptionalJSON(b, `,"actionType":`, string(in.ActionType))
	b = appendOptionalJSON(b, `,"asgName":`, in.ASGName)
	return append(b, '}')
}

// appendEnabledJSON closes a port object. Eureka writes @enabled as a
// string even though "$" is a number.
func appendEnabledJSON(b []byte, enabled bool) []byte {
	if enabled {
		return append(b, `,"@enabled":"true"}`...)
	}
	return append(b, `,"@enabled":"false"}`...)
}

func appendMetadataEntriesJSON(b []byte, md registry.Metadata) []byte {
	for i, kv := range md {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, kv.Key)
		b = append(b, ':')
		b = appendJSONString(b, kv.Value)
	}
	return b
}

func appendOptionalJSON(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, key...)
	return appendJSONString(b, value)
}

// estimateApps guesses the encoded size of apps, a little over rather than
// under, so that encoding a full registry into an empty buffer allocates
// once instead of doubling its way up (which would copy the output about
// twice over and leave half of the last allocation unused).
func estimateApps(apps []registry.AppView, xml bool) int {
	n := 0
	for _, app := range apps {
		n += estimateApp(app, xml)
	}
	return n
}

func estimateApp(app registry.AppView, xml bool) int {
	// The fixed part of an instance: every key or tag, punctuation, class
	// names, and 13-digit timestamps.
	perInstance, perEntry := 840, 6
	if xml {
		perInstance, perEntry = 1220, 5
	}
	n := 2*len(app.Name) + 40
	for _, iv := range app.Instances {
		in := iv.Instance
		if in == nil {
			continue
		}
		n += perInstance + len(in.InstanceID) + len(in.HostName) + len(in.App) + len(in.IPAddr) + len(in.Sid) +
			len(in.AppGroupName) + len(in.HomePageURL) + len(in.StatusPageURL) + len(in.HealthCheckURL) +
			len(in.SecureHealthCheckURL) + len(in.VIPAddress) + len(in.SecureVIPAddress) + len(in.ASGName)
		for _, md := range [2]registry.Metadata{in.Metadata, in.DataCenterInfo.Metadata} {
			for _, kv := range md {
				n += perEntry + len(kv.Key) + len(kv.Value)
				if xml {
					n += len(kv.Key) // the end tag
				}
			}
		}
	}
	return n
}

// sidVisible reports whether Eureka writes sid: it leaves out "na" (its
// default) and "unknown".
func sidVisible(sid string) bool {
	return sid != "" && sid != "na" && sid != "unknown"
}

// statusName is the wire spelling of st. The registry always stores one of
// the five statuses; an empty one (a zero Instance) is written as UNKNOWN,
// which is what any Eureka client would read it as.
func statusName(st registry.Status) string {
	if st == "" {
		return string(registry.StatusUnknown)
	}
	return string(st)
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
