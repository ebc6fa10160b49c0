package wire

import "github.com/muster-registry/muster/registry"

// The fields of Eureka's instance document, named once for both formats.
// The JSON and XML decoders look each key or element name up here and read
// the value the way their format writes that kind of field; what a value
// becomes (a status read leniently, a port's enabled default, …) is decided
// here or in the helpers of decode.go, not per format.

// fieldKind says how a field's value is read and stored.
type fieldKind uint8

const (
	fieldUnknown    fieldKind = iota // not in the table: skipped
	fieldText                        // a string, into a *string
	fieldStatus                      // a status name, read leniently (parseStatus), into a *registry.Status
	fieldActionType                  // ADDED, MODIFIED or DELETED (parseActionType), into a *registry.ActionType
	fieldBool                        // a flag (parseBool), into a *bool
	fieldInt32                       // an int that fits in 32 bits, into an *int
	fieldInt64                       // into an *int64
	fieldPort                        // the insecure port, on by default, into a *registry.Port
	fieldSecurePort                  // the secure port, off by default, into a *registry.Port
	fieldDataCenter                  // dataCenterInfo, into a *registry.DataCenterInfo
	fieldMetadata                    // a string map, into a *metadataBuilder
	fieldLeaseInfo                   // an object of leaseTable's fields
)

// instanceDoc is an instance being decoded, with what goes beside it.
type instanceDoc struct {
	in          *registry.Instance
	lastRenewal int64 // leaseInfo.lastRenewalTimestamp
	md          metadataBuilder
	idGiven     bool // instanceId was present and not null, even if empty (finishInstance)
}

func newInstanceDoc() instanceDoc { return instanceDoc{in: newInstance()} }

// finish applies the rules that need the whole body and returns the
// instance and its leaseInfo.lastRenewalTimestamp.
func (d *instanceDoc) finish() (*registry.Instance, int64) {
	d.in.Metadata = d.md.finish()
	finishInstance(d.in, d.idGiven)
	return d.in, d.lastRenewal
}

// setString stores a fieldText value at dst. An instanceId stored here was
// given, even empty, which decides Spring's rule in finishInstance.
func (d *instanceDoc) setString(dst any, s string) {
	p := dst.(*string)
	*p = s
	if p == &d.in.InstanceID {
		d.idGiven = true
	}
}

// fieldTable is one of the tables below.
type fieldTable uint8

const (
	instanceTable fieldTable = iota // the instance's fields
	leaseTable                      // leaseInfo's fields
)

// field looks name up in the table: the kind of the field and where in d
// its value goes; fieldUnknown for a name the table does not know.
//
// The tables are switches rather than maps: Go compiles a switch over
// constant strings into a few word comparisons, and a lookup runs for every
// key of every register body. One function holds both, so that a lookup is
// one call.
func (t fieldTable) field(d *instanceDoc, name string) (fieldKind, any) {
	in := d.in
	if t == leaseTable {
		// leaseInfo: the client's lease figures and the timestamps a
		// server wrote. renewalTimestamp is the legacy name of
		// lastRenewalTimestamp (LeaseInfo's constructor).
		switch name {
		case "renewalIntervalInSecs":
			return fieldInt32, &in.RenewalIntervalSecs
		case "durationInSecs":
			return fieldInt32, &in.LeaseDurationSecs
		case "registrationTimestamp":
			return fieldInt64, &in.RegistrationTimestamp
		case "lastRenewalTimestamp", "renewalTimestamp":
			return fieldInt64, &d.lastRenewal
		case "evictionTimestamp":
			return fieldInt64, &in.EvictionTimestamp
		case "serviceUpTimestamp":
			return fieldInt64, &in.ServiceUpTimestamp
		}
		return fieldUnknown, nil
	}
	// The instance's fields that Eureka's decoders read
	// (InstanceInfoDeserializer, Converters.InstanceInfoConverter; see
	// doc.go).
	switch name {
	case "instanceId":
		return fieldText, &in.InstanceID
	case "hostName":
		return fieldText, &in.HostName
	case "app":
		return fieldText, &in.App
	case "ipAddr":
		return fieldText, &in.IPAddr
	case "sid":
		return fieldText, &in.Sid
	case "status":
		return fieldStatus, &in.Status
	case "overriddenStatus", "overriddenstatus":
		// overriddenstatus is the spelling before Netflix/eureka#1051 and
		// the one XML and fargo still use.
		return fieldStatus, &in.OverriddenStatus
	case "port":
		return fieldPort, &in.Port
	case "securePort":
		return fieldSecurePort, &in.SecurePort
	case "countryId":
		return fieldInt32, &in.CountryID
	case "dataCenterInfo":
		return fieldDataCenter, &in.DataCenterInfo
	case "leaseInfo":
		return fieldLeaseInfo, nil
	case "metadata":
		return fieldMetadata, &d.md
	case "appGroupName":
		return fieldText, &in.AppGroupName
	case "homePageUrl":
		return fieldText, &in.HomePageURL
	case "statusPageUrl":
		return fieldText, &in.StatusPageURL
	case "healthCheckUrl":
		return fieldText, &in.HealthCheckURL
	case "secureHealthCheckUrl":
		return fieldText, &in.SecureHealthCheckURL
	case "vipAddress":
		return fieldText, &in.VIPAddress
	case "secureVipAddress":
		return fieldText, &in.SecureVIPAddress
	case "asgName":
		return fieldText, &in.ASGName
	case "isCoordinatingDiscoveryServer":
		return fieldBool, &in.IsCoordinatingDiscoveryServer
	case "lastUpdatedTimestamp":
		return fieldInt64, &in.LastUpdatedTimestamp
	case "lastDirtyTimestamp":
		return fieldInt64, &in.LastDirtyTimestamp
	case "actionType":
		return fieldActionType, &in.ActionType
	}
	return fieldUnknown, nil
}

// setText stores the text of a fieldStatus, fieldActionType or fieldBool
// (or a fieldText, which the decoders store themselves) at dst.
func setText(k fieldKind, dst any, s string) {
	switch k {
	case fieldText:
		*dst.(*string) = s
	case fieldStatus:
		*dst.(*registry.Status) = parseStatus(s)
	case fieldActionType:
		*dst.(*registry.ActionType) = parseActionType(s)
	case fieldBool:
		*dst.(*bool) = parseBool(s)
	}
}

// fieldBits is the size of a fieldInt32 or fieldInt64.
func fieldBits(k fieldKind) int {
	if k == fieldInt32 {
		return 32
	}
	return 64
}

// setInt stores the value of a fieldInt32 or fieldInt64 at dst.
func setInt(k fieldKind, dst any, n int64) {
	if k == fieldInt32 {
		*dst.(*int) = int(n)
	} else {
		*dst.(*int64) = n
	}
}
