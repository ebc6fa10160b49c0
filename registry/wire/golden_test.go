package wire_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Each golden test also asserts a few exact substrings taken from
// EUREKA.md §2, so that a wrong -update cannot pass unnoticed.

func TestAppendApplicationsJSON_full(t *testing.T) {
	apps := fullApps()
	got := wire.AppendApplicationsJSON(nil, apps, "1", registry.HashcodeOf(apps))
	checkGolden(t, "full.golden.json", got)
	mustValidJSON(t, got)
	mustContain(t, got,
		`{"applications":{"versions__delta":"1","apps__hashcode":"DOWN_1_OUT_OF_SERVICE_1_UP_1_","application":[{"name":"ORDERS","instance":[{"instanceId":"host-a:orders:8080","hostName":"host-a","app":"ORDERS","ipAddr":"10.0.0.12","status":"UP","overriddenStatus":"UNKNOWN",`,
		`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`,
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`,
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":1718000000000,"lastRenewalTimestamp":1718000150000,"evictionTimestamp":0,"serviceUpTimestamp":1718000000123},`,
		`"metadata":{"management.port":"8080","zone":"zone1"},"homePageUrl":"http://host-a:8080/",`,
		`"isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"1718000000130","lastDirtyTimestamp":"1717999999000","actionType":"ADDED"}`,
		`"sid":"s-17","status":"DOWN"`,
		`"metadata":{"@class":"java.util.Collections$EmptyMap"},"appGroupName":"SHOP"`,
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon","metadata":{"availability-zone":"us-east-1a","instance-id":"i-0abc123","local-ipv4":"10.1.2.3"}}`,
		`"owner":"Ops & \"Payments\" <pay@example.com>"`,
		`"asgName":"payments-v042"}]}]}}`,
	)
	mustNotContain(t, got, `"instanceId":""`, `"sid":""`, `"secureHealthCheckUrl":""`)
}

func TestAppendApplicationsJSON_delta(t *testing.T) {
	apps := deltaApps()
	got := wire.AppendApplicationsJSON(nil, apps, "7", "DOWN_1_UP_1_")
	checkGolden(t, "delta.golden.json", got)
	mustValidJSON(t, got)
	mustContain(t, got, `"versions__delta":"7","apps__hashcode":"DOWN_1_UP_1_"`,
		`"actionType":"ADDED"`, `"actionType":"MODIFIED"`, `"actionType":"DELETED"`)
}

func TestAppendApplicationsJSON_empty(t *testing.T) {
	got := wire.AppendApplicationsJSON(nil, nil, "1", "")
	checkGolden(t, "empty.golden.json", got)
	want := `{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAppendApplicationJSON_golden(t *testing.T) {
	got := wire.AppendApplicationJSON(nil, fullApps()[0])
	checkGolden(t, "app.golden.json", got)
	mustValidJSON(t, got)
	mustContain(t, got, `{"application":{"name":"ORDERS","instance":[{"instanceId":"host-a:orders:8080",`)
	if !bytes.HasSuffix(got, []byte(`}]}}`)) {
		t.Errorf("got %s, want it to end with }]}}", got)
	}
	empty := wire.AppendApplicationJSON(nil, registry.AppView{Name: "NONE"})
	if want := `{"application":{"name":"NONE","instance":[]}}`; string(empty) != want {
		t.Errorf("app without instances: got %s, want %s", empty, want)
	}
}

func TestAppendInstanceJSON_golden(t *testing.T) {
	iv := fullApps()[1].Instances[0]
	got := wire.AppendInstanceJSON(nil, iv)
	checkGolden(t, "instance.golden.json", got)
	mustValidJSON(t, got)
	mustContain(t, got, `{"instance":{"hostName":"ip-10-1-2-3.ec2.internal","app":"PAYMENTS",`,
		`"overriddenStatus":"OUT_OF_SERVICE"`)

	body := wire.AppendInstanceBodyJSON(nil, iv)
	if want := `{"instance":` + string(body) + `}`; string(got) != want {
		t.Errorf("AppendInstanceJSON is not the body in a wrapper:\ngot  %s\nwant %s", got, want)
	}
}

func TestAppendApplicationsXML_full(t *testing.T) {
	apps := fullApps()
	got := wire.AppendApplicationsXML(nil, apps, "1", registry.HashcodeOf(apps))
	checkGolden(t, "full.golden.xml", got)
	mustWellFormedXML(t, got)
	mustContain(t, got,
		`<applications><versions__delta>1</versions__delta><apps__hashcode>DOWN_1_OUT_OF_SERVICE_1_UP_1_</apps__hashcode><application><name>ORDERS</name><instance><instanceId>host-a:orders:8080</instanceId><hostName>host-a</hostName><app>ORDERS</app><ipAddr>10.0.0.12</ipAddr><status>UP</status><overriddenstatus>UNKNOWN</overriddenstatus>`,
		`<port enabled="true">8080</port><securePort enabled="false">443</securePort><countryId>1</countryId>`,
		`<dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>`,
		`<leaseInfo><renewalIntervalInSecs>30</renewalIntervalInSecs><durationInSecs>90</durationInSecs><registrationTimestamp>1718000000000</registrationTimestamp><lastRenewalTimestamp>1718000150000</lastRenewalTimestamp><evictionTimestamp>0</evictionTimestamp><serviceUpTimestamp>1718000000123</serviceUpTimestamp></leaseInfo>`,
		`<metadata><management.port>8080</management.port><zone>zone1</zone></metadata>`,
		`<isCoordinatingDiscoveryServer>false</isCoordinatingDiscoveryServer><lastUpdatedTimestamp>1718000000130</lastUpdatedTimestamp><lastDirtyTimestamp>1717999999000</lastDirtyTimestamp><actionType>ADDED</actionType></instance>`,
		`<metadata class="java.util.Collections$EmptyMap"/>`,
		`<dataCenterInfo class="com.netflix.appinfo.AmazonInfo"><name>Amazon</name><metadata><availability-zone>us-east-1a</availability-zone><instance-id>i-0abc123</instance-id><local-ipv4>10.1.2.3</local-ipv4></metadata></dataCenterInfo>`,
		`<git__commit>4f2a9c1</git__commit>`,
		`<owner>Ops &amp; &quot;Payments&quot; &lt;pay@example.com&gt;</owner>`,
		`<homePageUrl>http://10.1.2.3:9090/?a=1&amp;b=2</homePageUrl>`,
		`</instance></application></applications>`,
	)
	mustNotContain(t, got, "<overriddenStatus>", "<?xml")
}

func TestAppendApplicationsXML_delta(t *testing.T) {
	got := wire.AppendApplicationsXML(nil, deltaApps(), "7", "DOWN_1_UP_1_")
	checkGolden(t, "delta.golden.xml", got)
	mustWellFormedXML(t, got)
	mustContain(t, got, `<versions__delta>7</versions__delta><apps__hashcode>DOWN_1_UP_1_</apps__hashcode>`,
		`<actionType>DELETED</actionType>`)
}

func TestAppendApplicationsXML_empty(t *testing.T) {
	got := wire.AppendApplicationsXML(nil, nil, "1", "")
	checkGolden(t, "empty.golden.xml", got)
	want := `<applications><versions__delta>1</versions__delta><apps__hashcode></apps__hashcode></applications>`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAppendApplicationXML_golden(t *testing.T) {
	got := wire.AppendApplicationXML(nil, fullApps()[0])
	checkGolden(t, "app.golden.xml", got)
	mustWellFormedXML(t, got)
	mustContain(t, got, `<application><name>ORDERS</name><instance><instanceId>host-a:orders:8080</instanceId>`)
}

func TestAppendInstanceXML_golden(t *testing.T) {
	got := wire.AppendInstanceXML(nil, fullApps()[1].Instances[0])
	checkGolden(t, "instance.golden.xml", got)
	mustWellFormedXML(t, got)
	mustContain(t, got, `<instance><hostName>ip-10-1-2-3.ec2.internal</hostName>`,
		`<overriddenstatus>OUT_OF_SERVICE</overriddenstatus>`, `<asgName>payments-v042</asgName></instance>`)
}

// TestAppendInstanceBodyJSON_defaults pins what an instance that left
// things unset looks like: lease defaults 30/90, sid "na" hidden, data
// center class derived from the name whatever the stored class says, no
// @Auto strings for empty fields, UNKNOWN for a missing status.
func TestAppendInstanceBodyJSON_defaults(t *testing.T) {
	in := &registry.Instance{
		HostName:       "h",
		App:            "A",
		IPAddr:         "1.2.3.4",
		Sid:            "na",
		Port:           registry.Port{Number: 80, Enabled: true},
		DataCenterInfo: registry.DataCenterInfo{Class: "com.example.Custom", Name: "MyOwn"},
	}
	got := string(wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in}))
	want := `{"hostName":"h","app":"A","ipAddr":"1.2.3.4","status":"UNKNOWN","overriddenStatus":"UNKNOWN",` +
		`"port":{"$":80,"@enabled":"true"},"securePort":{"$":0,"@enabled":"false"},"countryId":0,` +
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,"serviceUpTimestamp":0},` +
		`"metadata":{"@class":"java.util.Collections$EmptyMap"},` +
		`"isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"0","lastDirtyTimestamp":"0"}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := string(wire.AppendInstanceBodyJSON(nil, registry.InstanceView{})); got != "null" {
		t.Errorf("nil instance: got %s, want null", got)
	}
}

// TestAppendApplicationsJSON_appendsToBuffer checks that the encoders
// append and leave what the buffer held before.
func TestAppendApplicationsJSON_appendsToBuffer(t *testing.T) {
	prefix := []byte("PREFIX")
	got := wire.AppendApplicationsJSON(prefix, nil, "1", "")
	if !bytes.HasPrefix(got, prefix) || !bytes.HasSuffix(got, []byte(`"application":[]}}`)) {
		t.Errorf("got %s", got)
	}
	got = wire.AppendApplicationsXML([]byte("X"), nil, "1", "")
	if !bytes.HasPrefix(got, []byte("X<applications>")) {
		t.Errorf("got %s", got)
	}
}

func mustContain(t *testing.T, got []byte, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("output lacks %s\noutput: %s", s, got)
		}
	}
}

func mustNotContain(t *testing.T, got []byte, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if bytes.Contains(got, []byte(s)) {
			t.Errorf("output has %s, want it absent", s)
		}
	}
}

func mustValidJSON(t *testing.T, b []byte) {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("output is not valid JSON: %s", b)
	}
}

// mustWellFormedXML parses b with encoding/xml, as Prometheus's Eureka
// discovery and fargo read it.
func mustWellFormedXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("output is not well-formed XML: %v\n%s", err, b)
		}
	}
}
