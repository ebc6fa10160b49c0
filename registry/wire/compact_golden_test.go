package wire_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// javaCompactApps are the two instances whose compact documents the real
// Java Eureka server (eureka-core 1.10.18, run once to record them; the
// files are all this test needs of it) answered in
// testdata/java-compact.{json,xml}: registered with these bodies, the
// first given an OUT_OF_SERVICE override, then fetched with
// X-Eureka-Accept: compact.
func javaCompactApps(t *testing.T) []registry.AppView {
	t.Helper()
	bodies := []struct {
		body    string
		status  registry.Status
		action  registry.ActionType
		updated int64
	}{
		{`{"instance":{"instanceId":"h1:svc:8080","hostName":"h1","app":"SVC","ipAddr":"10.0.0.1","sid":"s-1","appGroupName":"GRP","status":"UP","overriddenStatus":"UNKNOWN","port":{"$":8080,"@enabled":"true"},"securePort":{"$":8443,"@enabled":"true"},"countryId":1,"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{"zone":"a","k.x":"v<&>"},"homePageUrl":"http://h1:8080/","statusPageUrl":"http://h1:8081/info","healthCheckUrl":"http://h1:8081/health","secureHealthCheckUrl":"https://h1:8443/health","vipAddress":"svc","secureVipAddress":"svc-s","isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"1718000000000","lastDirtyTimestamp":"1718000000000","asgName":"asg-1"}}`,
			registry.StatusOutOfService, registry.ActionModified, 1796227559198},
		{`{"instance":{"instanceId":"i-123","hostName":"ec2-1.compute","app":"AWSAPP","ipAddr":"10.0.0.2","status":"UP","port":{"$":80,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,"dataCenterInfo":{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon","metadata":{"local-hostname":"ip-10-0-0-2","instance-id":"i-123","public-ipv4":"1.2.3.4","availability-zone":"us-east-1a","instance-type":"m5.large","ami-id":"ami-9","public-hostname":"ec2-1.compute","local-ipv4":"10.0.0.2"}},"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{"@class":"java.util.Collections$EmptyMap"},"vipAddress":"awsapp","isCoordinatingDiscoveryServer":"false","lastUpdatedTimestamp":"1718000000000","lastDirtyTimestamp":"1718000000000"}}`,
			registry.StatusUp, registry.ActionAdded, 1796227559164},
	}
	var apps []registry.AppView
	for _, b := range bodies {
		in, err := wire.DecodeInstanceJSON([]byte(b.body))
		if err != nil {
			t.Fatal(err)
		}
		in.Status, in.ActionType, in.LastUpdatedTimestamp = b.status, b.action, b.updated
		if b.status == registry.StatusOutOfService {
			in.OverriddenStatus = b.status
		}
		apps = append(apps, registry.AppView{Name: in.App, Instances: []registry.InstanceView{{Instance: in}}})
	}
	return apps
}

// The compact documents are byte for byte what the Java server sends for
// the same registry, in both formats, but for the order of a map's entries
// (its XML mini codec writes no indentation, unlike its full one).
func TestAppendApplicationsCompact_matchesJavaServer(t *testing.T) {
	apps := javaCompactApps(t)
	for _, c := range []struct {
		file   string
		encode func([]byte, []registry.AppView, string, string) []byte
	}{
		{"java-compact.json", wire.AppendApplicationsCompactJSON},
		{"java-compact.xml", wire.AppendApplicationsCompactXML},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		// A map's order means nothing: the registry keeps metadata sorted by
		// key, the Java server writes its HashMap's order.
		for _, order := range [][2]string{
			{`"instance-id":"i-123","public-ipv4":"1.2.3.4","availability-zone":"us-east-1a","public-hostname":"ec2-1.compute","local-ipv4":"10.0.0.2"`,
				`"availability-zone":"us-east-1a","instance-id":"i-123","local-ipv4":"10.0.0.2","public-hostname":"ec2-1.compute","public-ipv4":"1.2.3.4"`},
			{`<instance-id>i-123</instance-id><public-ipv4>1.2.3.4</public-ipv4><availability-zone>us-east-1a</availability-zone><public-hostname>ec2-1.compute</public-hostname><local-ipv4>10.0.0.2</local-ipv4>`,
				`<availability-zone>us-east-1a</availability-zone><instance-id>i-123</instance-id><local-ipv4>10.0.0.2</local-ipv4><public-hostname>ec2-1.compute</public-hostname><public-ipv4>1.2.3.4</public-ipv4>`},
		} {
			want = bytes.Replace(want, []byte(order[0]), []byte(order[1]), 1)
		}
		got := c.encode(nil, apps, "1", registry.HashcodeOf(apps))
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.file, got, want)
		}
	}
}

// An empty compact document, as the Java server answers a VIP lookup that
// matches nothing.
func TestAppendApplicationsCompact_empty(t *testing.T) {
	if got, want := string(wire.AppendApplicationsCompactJSON(nil, nil, "1", "")), `{"applications":{"application":[],"versions__delta":"1","apps__hashcode":""}}`; got != want {
		t.Errorf("JSON: got %s, want %s", got, want)
	}
	if got, want := string(wire.AppendApplicationsCompactXML(nil, nil, "1", "")), `<applications><versions__delta>1</versions__delta><apps__hashcode></apps__hashcode></applications>`; got != want {
		t.Errorf("XML: got %s, want %s", got, want)
	}
}

// The compact forms decode with the project's own decoders to the fields
// they keep, and a single compact application is the document's member.
func TestAppendApplicationsCompact_decodes(t *testing.T) {
	apps := javaCompactApps(t)
	for _, xml := range []bool{false, true} {
		doc := wire.AppendApplicationsCompactJSON(nil, apps, "3", registry.HashcodeOf(apps))
		decode := wire.DecodeApplicationsJSON
		if xml {
			doc = wire.AppendApplicationsCompactXML(nil, apps, "3", registry.HashcodeOf(apps))
			decode = wire.DecodeApplicationsXML
		}
		got, err := decode(doc)
		if err != nil {
			t.Fatalf("xml %v: %v", xml, err)
		}
		if got.Hashcode != "OUT_OF_SERVICE_1_UP_1_" || got.VersionsDelta != "3" || len(got.Apps) != 2 {
			t.Fatalf("xml %v: decoded %+v", xml, got)
		}
		aws := got.Apps[1].Instances[0].Instance
		if aws.InstanceID != "i-123" || aws.Port != (registry.Port{Number: 80, Enabled: true}) || aws.LastUpdatedTimestamp != 1796227559164 ||
			len(aws.DataCenterInfo.Metadata) != 5 || hasKey(aws.DataCenterInfo.Metadata, "ami-id") {
			t.Errorf("xml %v: Amazon instance read back as %+v", xml, aws)
		}
		svc := got.Apps[0].Instances[0].Instance
		if svc.Status != registry.StatusOutOfService || svc.ASGName != "asg-1" || len(svc.Metadata) != 0 || svc.Sid != "" {
			t.Errorf("xml %v: instance read back as %+v", xml, svc)
		}
	}
	body := wire.AppendApplicationBodyCompactJSON(nil, apps[0])
	if got, want := string(wire.AppendApplicationCompactJSON(nil, apps[0])), `{"application":`+string(body)+`}`; got != want {
		t.Errorf("single app: got %s, want %s", got, want)
	}
}

func hasKey(md registry.Metadata, key string) bool {
	_, ok := md.Get(key)
	return ok
}
