package wire

import "github.com/muster-registry/muster/registry"

// The fields of Eureka's instance document, named once for both formats.
// The JSON and XML decoders look each key or element name up here and read
// the value the way their format writes that kind of field; what a value
// becomes (a status read leniently, a port's enabled default, …) is decided
// here or in the helpers of decode.go, not per format.

// fieldKind says how a field's value is read and where it goes.
type fieldKind uint8

const (
	fieldText        fieldKind = iota + 1 // a string
	fieldStatus                           // a status name, read leniently (parseStatus)
	fieldActionType                       // ADDED, MODIFIED or DELETED (parseActionType)
	fieldBool                             // a flag (parseBool)
	fieldInt32                            // an int that fits in 32 bits
	fieldInt64                            // an int64
	fieldPort                             // the insecure port: number and enabled flag, on by default
	fieldSecurePort                       // the secure port, off by default
	fieldDataCenter                       // dataCenterInfo
	fieldMetadata                         // the instance's metadata map
	fieldLeaseInfo                        // an object of leaseFields
	fieldLastRenewal                      // leaseInfo.lastRenewalTimestamp, kept beside the instance
)

// instanceField is one entry of a field table: its kind and, for the kinds
// stored in the instance, where (a pointer of the type the kind stores:
// *string, *registry.Status, *registry.ActionType, *bool, *int, *int64,
// *registry.Port, *registry.DataCenterInfo).
type instanceField struct {
	kind fieldKind
	at   func(in *registry.Instance) any
}

// fieldTable maps a field's name in the document to its entry. Names a
// decoder does not find are skipped. It is a map written once; lookups go
// through buckets by name length, which costs less than hashing every key
// of every register body.
type fieldTable struct {
	byName map[string]instanceField
	byLen  [][]namedField
}

type namedField struct {
	name string
	instanceField
}

func newFieldTable(byName map[string]instanceField) *fieldTable {
	t := &fieldTable{byName: byName}
	for name, f := range byName {
		for len(t.byLen) <= len(name) {
			t.byLen = append(t.byLen, nil)
		}
		t.byLen[len(name)] = append(t.byLen[len(name)], namedField{name, f})
	}
	return t
}

// lookup finds the entry of a field name.
func (t *fieldTable) lookup(name string) (instanceField, bool) {
	if len(name) < len(t.byLen) {
		for _, e := range t.byLen[len(name)] {
			if e.name == name {
				return e.instanceField, true
			}
		}
	}
	return instanceField{}, false
}

// instanceFields are the fields of an instance that Eureka's decoders read
// (InstanceInfoDeserializer, Converters.InstanceInfoConverter); see doc.go.
var instanceFields = newFieldTable(map[string]instanceField{
	"instanceId": {fieldText, func(in *registry.Instance) any { return &in.InstanceID }},
	"hostName":   {fieldText, func(in *registry.Instance) any { return &in.HostName }},
	"app":        {fieldText, func(in *registry.Instance) any { return &in.App }},
	"ipAddr":     {fieldText, func(in *registry.Instance) any { return &in.IPAddr }},
	"sid":        {fieldText, func(in *registry.Instance) any { return &in.Sid }},
	"status":     {fieldStatus, func(in *registry.Instance) any { return &in.Status }},
	// overriddenstatus is the spelling before Netflix/eureka#1051 and the
	// one XML and fargo still use.
	"overriddenStatus":              {fieldStatus, func(in *registry.Instance) any { return &in.OverriddenStatus }},
	"overriddenstatus":              {fieldStatus, func(in *registry.Instance) any { return &in.OverriddenStatus }},
	"port":                          {fieldPort, func(in *registry.Instance) any { return &in.Port }},
	"securePort":                    {fieldSecurePort, func(in *registry.Instance) any { return &in.SecurePort }},
	"countryId":                     {fieldInt32, func(in *registry.Instance) any { return &in.CountryID }},
	"dataCenterInfo":                {fieldDataCenter, func(in *registry.Instance) any { return &in.DataCenterInfo }},
	"leaseInfo":                     {kind: fieldLeaseInfo},
	"metadata":                      {kind: fieldMetadata},
	"appGroupName":                  {fieldText, func(in *registry.Instance) any { return &in.AppGroupName }},
	"homePageUrl":                   {fieldText, func(in *registry.Instance) any { return &in.HomePageURL }},
	"statusPageUrl":                 {fieldText, func(in *registry.Instance) any { return &in.StatusPageURL }},
	"healthCheckUrl":                {fieldText, func(in *registry.Instance) any { return &in.HealthCheckURL }},
	"secureHealthCheckUrl":          {fieldText, func(in *registry.Instance) any { return &in.SecureHealthCheckURL }},
	"vipAddress":                    {fieldText, func(in *registry.Instance) any { return &in.VIPAddress }},
	"secureVipAddress":              {fieldText, func(in *registry.Instance) any { return &in.SecureVIPAddress }},
	"asgName":                       {fieldText, func(in *registry.Instance) any { return &in.ASGName }},
	"isCoordinatingDiscoveryServer": {fieldBool, func(in *registry.Instance) any { return &in.IsCoordinatingDiscoveryServer }},
	"lastUpdatedTimestamp":          {fieldInt64, func(in *registry.Instance) any { return &in.LastUpdatedTimestamp }},
	"lastDirtyTimestamp":            {fieldInt64, func(in *registry.Instance) any { return &in.LastDirtyTimestamp }},
	"actionType":                    {fieldActionType, func(in *registry.Instance) any { return &in.ActionType }},
})

// leaseFields are the fields of leaseInfo: the client's lease figures and
// the timestamps a server wrote. renewalTimestamp is the legacy name of
// lastRenewalTimestamp (LeaseInfo's constructor).
var leaseFields = newFieldTable(map[string]instanceField{
	"renewalIntervalInSecs": {fieldInt32, func(in *registry.Instance) any { return &in.RenewalIntervalSecs }},
	"durationInSecs":        {fieldInt32, func(in *registry.Instance) any { return &in.LeaseDurationSecs }},
	"registrationTimestamp": {fieldInt64, func(in *registry.Instance) any { return &in.RegistrationTimestamp }},
	"lastRenewalTimestamp":  {kind: fieldLastRenewal},
	"renewalTimestamp":      {kind: fieldLastRenewal},
	"evictionTimestamp":     {fieldInt64, func(in *registry.Instance) any { return &in.EvictionTimestamp }},
	"serviceUpTimestamp":    {fieldInt64, func(in *registry.Instance) any { return &in.ServiceUpTimestamp }},
})

// instanceDoc is an instance being decoded, with what goes beside it.
type instanceDoc struct {
	in          *registry.Instance
	lastRenewal int64
	md          metadataBuilder
}

func newInstanceDoc() instanceDoc { return instanceDoc{in: newInstance()} }

// finish applies the rules that need the whole body and returns the
// instance and its leaseInfo.lastRenewalTimestamp.
func (d *instanceDoc) finish() (*registry.Instance, int64) {
	d.in.Metadata = d.md.finish()
	finishInstance(d.in)
	return d.in, d.lastRenewal
}

// setText stores the text of a fieldText, fieldStatus, fieldActionType or
// fieldBool.
func (f instanceField) setText(d *instanceDoc, s string) {
	switch f.kind {
	case fieldText:
		*f.at(d.in).(*string) = s
	case fieldStatus:
		*f.at(d.in).(*registry.Status) = parseStatus(s)
	case fieldActionType:
		*f.at(d.in).(*registry.ActionType) = parseActionType(s)
	case fieldBool:
		*f.at(d.in).(*bool) = parseBool(s)
	}
}

// bits is the size of a number field.
func (f instanceField) bits() int {
	if f.kind == fieldInt32 {
		return 32
	}
	return 64
}

// setInt stores the value of a fieldInt32, fieldInt64 or fieldLastRenewal.
func (f instanceField) setInt(d *instanceDoc, n int64) {
	switch f.kind {
	case fieldInt32:
		*f.at(d.in).(*int) = int(n)
	case fieldInt64:
		*f.at(d.in).(*int64) = n
	case fieldLastRenewal:
		d.lastRenewal = n
	}
}

// port is where a fieldPort or fieldSecurePort goes, and whether it is
// the secure one.
func (f instanceField) port(d *instanceDoc) (*registry.Port, bool) {
	return f.at(d.in).(*registry.Port), f.kind == fieldSecurePort
}

// dataCenter is where a fieldDataCenter goes.
func (f instanceField) dataCenter(d *instanceDoc) *registry.DataCenterInfo {
	return f.at(d.in).(*registry.DataCenterInfo)
}
