package wire_test

import (
	"reflect"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Register bodies as real clients send them, and the instances they must
// become.

// springBody is what Spring Cloud's client posts: a bean-style body
// (InstanceInfoJsonBeanSerializer) with numbers for timestamps, real
// booleans, nulls for unset fields and sid "na".
const springBody = `{"instance":{"instanceId":"host-a:orders:8080","app":"ORDERS","appGroupName":null,
"ipAddr":"10.0.0.12","sid":"na","homePageUrl":"http://host-a:8080/","statusPageUrl":"http://host-a:8080/actuator/info",
"healthCheckUrl":"http://host-a:8080/actuator/health","secureHealthCheckUrl":null,"vipAddress":"orders",
"secureVipAddress":"orders","countryId":1,
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"hostName":"host-a","status":"UP","overriddenStatus":"UNKNOWN",
"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,"serviceUpTimestamp":0},
"isCoordinatingDiscoveryServer":false,"lastUpdatedTimestamp":1718000000000,"lastDirtyTimestamp":1717999999000,
"actionType":"ADDED","asgName":null,"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},
"metadata":{"management.port":"8080"}}}`

func TestDecodeInstanceJSON_springBody(t *testing.T) {
	want := &registry.Instance{
		InstanceID:       "host-a:orders:8080",
		HostName:         "host-a",
		App:              "ORDERS",
		IPAddr:           "10.0.0.12",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 443},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},

		RenewalIntervalSecs:  30,
		LeaseDurationSecs:    90,
		Metadata:             registry.Metadata{{Key: "management.port", Value: "8080"}},
		HomePageURL:          "http://host-a:8080/",
		StatusPageURL:        "http://host-a:8080/actuator/info",
		HealthCheckURL:       "http://host-a:8080/actuator/health",
		VIPAddress:           "orders",
		SecureVIPAddress:     "orders",
		LastUpdatedTimestamp: 1718000000000,
		LastDirtyTimestamp:   1717999999000,
		ActionType:           registry.ActionAdded,
	}
	got := mustDecodeJSON(t, springBody)
	mustEqualInstance(t, got, want)
	if err := got.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

// fargoJSONBody is what hudl/fargo v1.4.0 posts with UseJson: every struct
// field, set or not (so empty strings), the port number as a string,
// overriddenstatus in lower case, a zero leaseInfo, and MyDataCenterInfo
// as the class.
const fargoJSONBody = `{"instance":{"instanceId":"","hostName":"i-123.local","app":"fargo-test","ipAddr":"10.0.0.5",
"vipAddress":"fargo","secureVipAddress":"","status":"UP","overriddenstatus":"","homePageUrl":"",
"statusPageUrl":"http://10.0.0.5:8080/status","healthCheckUrl":"","countryId":1,
"dataCenterInfo":{"name":"MyOwn","@class":"com.netflix.appinfo.MyDataCenterInfo"},
"leaseInfo":{"renewalIntervalInSecs":0,"durationInSecs":0,"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,"serviceUpTimestamp":0},
"metadata":{"version":"1.2"},"port":{"$":"8080","@enabled":"true"},"securePort":{"$":"0","@enabled":"false"}}}`

func TestDecodeInstanceJSON_fargoBody(t *testing.T) {
	want := &registry.Instance{
		HostName:         "i-123.local",
		App:              "FARGO-TEST",
		IPAddr:           "10.0.0.5",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 0},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: "com.netflix.appinfo.MyDataCenterInfo", Name: "MyOwn"},
		Metadata:         registry.Metadata{{Key: "version", Value: "1.2"}},
		StatusPageURL:    "http://10.0.0.5:8080/status",
		VIPAddress:       "fargo",
	}
	got := mustDecodeJSON(t, fargoJSONBody)
	mustEqualInstance(t, got, want)
	if err := got.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
	if got.ID() != "i-123.local" {
		t.Errorf("ID() = %q, want the host name", got.ID())
	}
}

// fargoXMLBody is what fargo posts by default (XML): its struct order, no
// class attribute on dataCenterInfo, an empty data center metadata element
// and ports last.
const fargoXMLBody = `<instance><instanceId></instanceId><hostName>i-123.local</hostName><app>fargo-test</app>` +
	`<ipAddr>10.0.0.5</ipAddr><vipAddress>fargo</vipAddress><secureVipAddress></secureVipAddress><status>UP</status>` +
	`<overriddenstatus></overriddenstatus><homePageUrl></homePageUrl><statusPageUrl>http://10.0.0.5:8080/status</statusPageUrl>` +
	`<healthCheckUrl></healthCheckUrl><countryId>1</countryId><dataCenterInfo><name>MyOwn</name><metadata></metadata></dataCenterInfo>` +
	`<leaseInfo><renewalIntervalInSecs>0</renewalIntervalInSecs><durationInSecs>0</durationInSecs><registrationTimestamp>0</registrationTimestamp>` +
	`<lastRenewalTimestamp>0</lastRenewalTimestamp><evictionTimestamp>0</evictionTimestamp><serviceUpTimestamp>0</serviceUpTimestamp></leaseInfo>` +
	`<metadata><version>1.2</version><git__sha>abc</git__sha></metadata><port enabled="true">8080</port><securePort enabled="false">0</securePort></instance>`

func TestDecodeInstanceXML_fargoBody(t *testing.T) {
	want := &registry.Instance{
		HostName:         "i-123.local",
		App:              "FARGO-TEST",
		IPAddr:           "10.0.0.5",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 0},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
		Metadata:         registry.Metadata{{Key: "git_sha", Value: "abc"}, {Key: "version", Value: "1.2"}},
		StatusPageURL:    "http://10.0.0.5:8080/status",
		VIPAddress:       "fargo",
	}
	got := mustDecodeXML(t, fargoXMLBody)
	mustEqualInstance(t, got, want)
}

// fargoAmazonXMLBody: fargo writes every AmazonMetadataType field, empty or
// not, and no instanceId, so the id comes from instance-id.
const fargoAmazonXMLBody = `<instance><instanceId></instanceId><hostName>ip-10-0-0-5</hostName><app>svc</app><ipAddr>10.0.0.5</ipAddr>` +
	`<status>STARTING</status><overriddenstatus>UNKNOWN</overriddenstatus><countryId>1</countryId>` +
	`<dataCenterInfo><name>Amazon</name><metadata><ami-launch-index></ami-launch-index><local-hostname>ip-10-0-0-5</local-hostname>` +
	`<availability-zone>eu-west-1b</availability-zone><instance-id>i-0ff</instance-id><public-ipv4></public-ipv4></metadata></dataCenterInfo>` +
	`<leaseInfo><renewalIntervalInSecs>0</renewalIntervalInSecs></leaseInfo><metadata></metadata>` +
	`<port enabled="true">80</port><securePort enabled="false">443</securePort></instance>`

func TestDecodeInstanceXML_fargoAmazonBody(t *testing.T) {
	got := mustDecodeXML(t, fargoAmazonXMLBody)
	want := &registry.Instance{
		HostName:         "ip-10-0-0-5",
		App:              "SVC",
		IPAddr:           "10.0.0.5",
		Status:           registry.StatusStarting,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 80, Enabled: true},
		SecurePort:       registry.Port{Number: 443},
		CountryID:        1,
		DataCenterInfo: registry.DataCenterInfo{Class: registry.DataCenterClassAmazon, Name: "Amazon", Metadata: registry.Metadata{
			{Key: "ami-launch-index", Value: ""},
			{Key: "availability-zone", Value: "eu-west-1b"},
			{Key: "instance-id", Value: "i-0ff"},
			{Key: "local-hostname", Value: "ip-10-0-0-5"},
			{Key: "public-ipv4", Value: ""},
		}},
	}
	mustEqualInstance(t, got, want)
	if got.ID() != "i-0ff" {
		t.Errorf("ID() = %q, want the EC2 instance-id", got.ID())
	}
}

// jsClientBody is eureka-js-client's register body: its config.instance as
// the user wrote it (lower-case app, no securePort, no leaseInfo, metadata
// from YAML with a number, a boolean and a null), plus status UP.
const jsClientBody = `{"instance":{"app":"jqservice","hostName":"localhost","ipAddr":"127.0.0.1",
"statusPageUrl":"http://localhost:8080/info","port":{"$":8080,"@enabled":"true"},"vipAddress":"jq.test.something.com",
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"metadata":{"weight":10,"canary":false,"ratio":0.5,"owner":null},"status":"UP"}}`

func TestDecodeInstanceJSON_jsClientBody(t *testing.T) {
	want := &registry.Instance{
		HostName:         "localhost",
		App:              "JQSERVICE",
		IPAddr:           "127.0.0.1",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 7002},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
		Metadata: registry.Metadata{
			{Key: "canary", Value: "false"},
			{Key: "ratio", Value: "0.5"},
			{Key: "weight", Value: "10"},
		},
		StatusPageURL: "http://localhost:8080/info",
		VIPAddress:    "jq.test.something.com",
	}
	got := mustDecodeJSON(t, jsClientBody)
	mustEqualInstance(t, got, want)
}

// TestDecodeInstanceJSON_jsClientAmazonBody: eureka-js-client on AWS sends
// name "Amazon" with the EC2 metadata it fetched and no @class, and a bare
// port number.
func TestDecodeInstanceJSON_jsClientAmazonBody(t *testing.T) {
	got := mustDecodeJSON(t, `{"instance":{"app":"svc","hostName":"ip-1","ipAddr":"10.0.0.1","port":8080,
"vipAddress":"svc","dataCenterInfo":{"name":"Amazon","metadata":{"instance-id":"i-1","availability-zone":"us-east-1a"}},"status":"UP"}}`)
	if got.Port != (registry.Port{Number: 8080, Enabled: true}) {
		t.Errorf("Port = %+v, want 8080 enabled", got.Port)
	}
	if got.DataCenterInfo.Class != registry.DataCenterClassAmazon || got.DataCenterInfo.Name != "Amazon" {
		t.Errorf("DataCenterInfo = %+v, want Amazon with AmazonInfo class", got.DataCenterInfo)
	}
	if got.ID() != "i-1" {
		t.Errorf("ID() = %q, want i-1", got.ID())
	}
}

// TestDecodeInstanceJSON_metadataInstanceID: clients written for a Spring
// server (e.g. the go-eureka-client template) send no instanceId but
// metadata.instanceId, and Spring's CloudJacksonJson builds the id from it.
func TestDecodeInstanceJSON_metadataInstanceID(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantID string
	}{
		{"prefixed with host", `{"instance":{"hostName":"10.0.0.1","app":"a","ipAddr":"10.0.0.1","port":{"$":8080,"@enabled":true},
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"metadata":{"instanceId":"myapp:1234"}}}`, "10.0.0.1:myapp:1234"},
		{"already has host", `{"instance":{"hostName":"h","app":"a","ipAddr":"1.1.1.1","metadata":{"instanceId":"h:a:1"}}}`, "h:a:1"},
		{"instanceId wins", `{"instance":{"instanceId":"x","hostName":"h","app":"a","ipAddr":"1.1.1.1","metadata":{"instanceId":"y"}}}`, "x"},
		{"blank ignored", `{"instance":{"hostName":"h","app":"a","ipAddr":"1.1.1.1","metadata":{"instanceId":" "}}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustDecodeJSON(t, tc.body)
			if got.InstanceID != tc.wantID {
				t.Errorf("InstanceID = %q, want %q", got.InstanceID, tc.wantID)
			}
		})
	}
}

// TestDecodeInstanceJSON_minimal: a body with only the fields that pass
// validation gets Eureka's InstanceInfo defaults for the rest.
func TestDecodeInstanceJSON_minimal(t *testing.T) {
	want := &registry.Instance{
		HostName:         "h",
		App:              "A",
		IPAddr:           "1.2.3.4",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 7001, Enabled: true},
		SecurePort:       registry.Port{Number: 7002, Enabled: false},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
	}
	got := mustDecodeJSON(t, `{"instance":{"hostName":"h","app":"a","ipAddr":"1.2.3.4","dataCenterInfo":{"name":"MyOwn"}}}`)
	mustEqualInstance(t, got, want)
	if err := got.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}

	gotXML := mustDecodeXML(t, `<instance><hostName>h</hostName><app>a</app><ipAddr>1.2.3.4</ipAddr><dataCenterInfo><name>MyOwn</name></dataCenterInfo></instance>`)
	mustEqualInstance(t, gotXML, want)
}

// TestDecodeInstanceJSON_missingDataCenterInfo leaves the data center zero,
// so that the registry's Validate answers as Eureka does.
func TestDecodeInstanceJSON_missingDataCenterInfo(t *testing.T) {
	for name, in := range map[string]*registry.Instance{
		"json": mustDecodeJSON(t, `{"instance":{"hostName":"h","app":"a","ipAddr":"1.2.3.4"}}`),
		"xml":  mustDecodeXML(t, `<instance><hostName>h</hostName><app>a</app><ipAddr>1.2.3.4</ipAddr></instance>`),
	} {
		if !reflect.DeepEqual(in.DataCenterInfo, registry.DataCenterInfo{}) {
			t.Errorf("%s: DataCenterInfo = %+v, want zero", name, in.DataCenterInfo)
		}
		if err := in.Validate(); err == nil || err.Error() != "registry: invalid instance: missing dataCenterInfo name" {
			t.Errorf("%s: Validate() = %v, want missing dataCenterInfo name", name, err)
		}
	}
}

func mustDecodeJSON(tb testing.TB, body string) *registry.Instance {
	tb.Helper()
	in, err := wire.DecodeInstanceJSON([]byte(body))
	if err != nil {
		tb.Fatalf("DecodeInstanceJSON: %v", err)
	}
	return in
}

func mustDecodeXML(tb testing.TB, body string) *registry.Instance {
	tb.Helper()
	in, err := wire.DecodeInstanceXML([]byte(body))
	if err != nil {
		tb.Fatalf("DecodeInstanceXML: %v", err)
	}
	return in
}
