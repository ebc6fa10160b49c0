package wire

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/muster-registry/muster/registry"
)

// eurekaInstanceFields are the names the field tables must know: every key
// of InstanceInfo and LeaseInfo that Eureka's decoders read, with the legacy
// spellings.
var (
	eurekaInstanceFields = []string{
		"instanceId", "hostName", "app", "ipAddr", "sid", "status", "overriddenStatus", "overriddenstatus",
		"port", "securePort", "countryId", "dataCenterInfo", "leaseInfo", "metadata", "appGroupName",
		"homePageUrl", "statusPageUrl", "healthCheckUrl", "secureHealthCheckUrl", "vipAddress",
		"secureVipAddress", "asgName", "isCoordinatingDiscoveryServer", "lastUpdatedTimestamp",
		"lastDirtyTimestamp", "actionType",
	}
	eurekaLeaseFields = []string{
		"renewalIntervalInSecs", "durationInSecs", "registrationTimestamp", "lastRenewalTimestamp",
		"renewalTimestamp", "evictionTimestamp", "serviceUpTimestamp",
	}
)

// fullInstance has every field set, so that the encoder writes them all.
func fullInstance() *registry.Instance {
	return &registry.Instance{
		InstanceID: "i-1", HostName: "h", App: "APP", AppGroupName: "GRP", IPAddr: "10.0.0.1", Sid: "7",
		Status: registry.StatusDown, OverriddenStatus: registry.StatusOutOfService,
		Port: registry.Port{Number: 80, Enabled: true}, SecurePort: registry.Port{Number: 443, Enabled: true},
		CountryID: 2, DataCenterInfo: registry.DataCenterInfo{Class: "c", Name: "MyOwn"},
		RenewalIntervalSecs: 30, LeaseDurationSecs: 90, RegistrationTimestamp: 1, EvictionTimestamp: 2, ServiceUpTimestamp: 3,
		Metadata:    registry.Metadata{{Key: "k", Value: "v"}},
		HomePageURL: "h1", StatusPageURL: "s1", HealthCheckURL: "c1", SecureHealthCheckURL: "c2",
		VIPAddress: "vip", SecureVIPAddress: "svip", ASGName: "asg", IsCoordinatingDiscoveryServer: true,
		LastUpdatedTimestamp: 4, LastDirtyTimestamp: 5, ActionType: registry.ActionAdded,
	}
}

// The tables know every field Eureka's decoders read and every key Muster's
// own encoder writes, and no other name.
func TestFieldTables_knowEurekasFieldsAndNoOthers(t *testing.T) {
	body := AppendInstanceJSON(nil, registry.InstanceView{Instance: fullInstance(), LastRenewalTimestamp: 6})
	var doc struct {
		Instance map[string]json.RawMessage `json:"instance"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Instance) < 25 {
		t.Fatalf("the encoder wrote %d keys of a full instance: %s", len(doc.Instance), body)
	}
	var lease map[string]json.RawMessage
	if err := json.Unmarshal(doc.Instance["leaseInfo"], &lease); err != nil {
		t.Fatal(err)
	}
	for key := range doc.Instance {
		if !slices.Contains(eurekaInstanceFields, key) {
			t.Errorf("the encoder writes %q, which the decoders would skip", key)
		}
	}
	for key := range lease {
		if !slices.Contains(eurekaLeaseFields, key) {
			t.Errorf("the encoder writes leaseInfo.%q, which the decoders would skip", key)
		}
	}

	d := newInstanceDoc()
	for _, tc := range []struct {
		tab   fieldTable
		names []string
	}{{instanceTable, eurekaInstanceFields}, {leaseTable, eurekaLeaseFields}} {
		for _, name := range tc.names {
			if k, _ := tc.tab.field(&d, name); k == fieldUnknown {
				t.Errorf("table %d does not know %q", tc.tab, name)
			}
		}
		for _, other := range []string{"", "x", "instanceID", "hostname", "Status", "overriddenSTATUS", "port ", "leaseinfo", "metadata\x00", "@class", "$"} {
			if k, _ := tc.tab.field(&d, other); k != fieldUnknown {
				t.Errorf("table %d knows %q", tc.tab, other)
			}
		}
	}
}

// Each entry points at a field of the type its kind stores, and no two
// names share a field unless they are spellings of one (a wrong entry would
// otherwise panic on the first body that sends it).
func TestFieldTables_pointAtFieldsOfTheirKind(t *testing.T) {
	want := map[fieldKind]reflect.Type{
		fieldText:       reflect.TypeFor[*string](),
		fieldStatus:     reflect.TypeFor[*registry.Status](),
		fieldActionType: reflect.TypeFor[*registry.ActionType](),
		fieldBool:       reflect.TypeFor[*bool](),
		fieldInt32:      reflect.TypeFor[*int](),
		fieldInt64:      reflect.TypeFor[*int64](),
		fieldPort:       reflect.TypeFor[*registry.Port](),
		fieldSecurePort: reflect.TypeFor[*registry.Port](),
		fieldDataCenter: reflect.TypeFor[*registry.DataCenterInfo](),
		fieldMetadata:   reflect.TypeFor[*metadataBuilder](),
		fieldLeaseInfo:  nil,
	}
	spellings := map[string]string{"overriddenstatus": "overriddenStatus", "renewalTimestamp": "lastRenewalTimestamp"}
	d := newInstanceDoc()
	owner := map[any]string{}
	for _, tc := range []struct {
		tab   fieldTable
		names []string
	}{{instanceTable, eurekaInstanceFields}, {leaseTable, eurekaLeaseFields}} {
		for _, name := range tc.names {
			k, dst := tc.tab.field(&d, name)
			typ, ok := want[k]
			if !ok {
				t.Errorf("%q: kind %d is not one the decoders read", name, k)
				continue
			}
			if reflect.TypeOf(dst) != typ {
				t.Errorf("%q: points at %T, kind %d stores %v", name, dst, k, typ)
				continue
			}
			if dst == nil {
				continue
			}
			if other, dup := owner[dst]; dup && spellings[name] != other && spellings[other] != name {
				t.Errorf("%q and %q store into the same field", name, other)
			}
			owner[dst] = name
		}
	}
}

// Every name in the tables decodes, in JSON and in XML, to the same
// instance, and to one that differs from an instance without the field:
// one table drives both formats.
func TestFieldTables_jsonAndXMLDecodeEveryFieldAlike(t *testing.T) {
	type sample struct{ json, xml string }
	byKind := map[fieldKind]func(name string) sample{
		fieldText:       func(n string) sample { return sample{`"v-` + n + `"`, `v-` + n} },
		fieldStatus:     func(string) sample { return sample{`"OUT_OF_SERVICE"`, `OUT_OF_SERVICE`} },
		fieldActionType: func(string) sample { return sample{`"MODIFIED"`, `MODIFIED`} },
		fieldBool:       func(string) sample { return sample{`true`, `true`} },
		fieldInt32:      func(string) sample { return sample{`4242`, `4242`} },
		fieldInt64:      func(string) sample { return sample{`1718000000123`, `1718000000123`} },
		fieldMetadata:   func(string) sample { return sample{`{"k":"v"}`, `<k>v</k>`} },
	}
	elem := func(name, attrs, body string) string { return "<" + name + attrs + ">" + body + "</" + name + ">" }
	type body struct{ json, xml string }
	bodies := map[string]body{}
	d := newInstanceDoc()
	for _, name := range eurekaInstanceFields {
		var b body
		switch k, _ := instanceTable.field(&d, name); k {
		case fieldPort:
			b = body{`{"port":{"$":4243,"@enabled":"false"}}`, elem("instance", "", elem("port", ` enabled="false"`, "4243"))}
		case fieldSecurePort:
			b = body{`{"securePort":{"$":4244,"@enabled":"true"}}`, elem("instance", "", elem("securePort", ` enabled="true"`, "4244"))}
		case fieldDataCenter:
			b = body{`{"dataCenterInfo":{"@class":"c","name":"Amazon","metadata":{"k":"v"}}}`,
				elem("instance", "", elem("dataCenterInfo", ` class="c"`, elem("name", "", "Amazon")+elem("metadata", "", elem("k", "", "v"))))}
		case fieldLeaseInfo:
			continue // its fields are below
		default:
			s := byKind[k](name)
			b = body{`{"` + name + `":` + s.json + `}`, elem("instance", "", elem(name, "", s.xml))}
		}
		bodies[name] = b
	}
	for _, name := range eurekaLeaseFields {
		k, _ := leaseTable.field(&d, name)
		s := byKind[k](name)
		bodies["leaseInfo."+name] = body{`{"leaseInfo":{"` + name + `":` + s.json + `}}`,
			elem("instance", "", elem("leaseInfo", "", elem(name, "", s.xml)))}
	}

	empty, emptyRenewal := decodeBoth(t, "none", `{}`, `<instance></instance>`)
	for name, b := range bodies {
		in, lastRenewal := decodeBoth(t, name, b.json, b.xml)
		if reflect.DeepEqual(in, empty) && lastRenewal == emptyRenewal {
			t.Errorf("%s: decoding it changed nothing", name)
		}
	}
}

// decodeBoth decodes one instance from JSON and from XML and fails unless
// both give the same.
func decodeBoth(t *testing.T, name, jsonBody, xmlBody string) (*registry.Instance, int64) {
	t.Helper()
	jin, jrenew, err := newJSONReader([]byte(jsonBody)).instance()
	if err != nil {
		t.Fatalf("%s: JSON %s: %v", name, jsonBody, err)
	}
	x := newXMLReader([]byte(xmlBody))
	if _, err := x.root(); err != nil {
		t.Fatalf("%s: XML %s: %v", name, xmlBody, err)
	}
	xin, xrenew, err := x.instance()
	if err != nil {
		t.Fatalf("%s: XML %s: %v", name, xmlBody, err)
	}
	if !reflect.DeepEqual(jin, xin) || jrenew != xrenew {
		t.Errorf("%s: JSON and XML differ:\nJSON %s → %+v, %d\nXML  %s → %+v, %d", name, jsonBody, jin, jrenew, xmlBody, xin, xrenew)
	}
	return jin, jrenew
}
