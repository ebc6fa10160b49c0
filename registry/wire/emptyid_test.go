package wire_test

import "testing"

// TestDecodeInstance_emptyInstanceID pins Eureka's rule for an instanceId
// sent empty, found with go-micro's Eureka plugin: the instance is keyed by
// its hostName (InstanceInfo#getId), which is what the client heartbeats
// under. Spring's hostName:metadata.instanceId rule applies only when the
// field is absent or null (CloudJacksonJson#updateIfNeeded checks
// getInstanceId() == null).
func TestDecodeInstance_emptyInstanceID(t *testing.T) {
	const (
		jsonTail = `"hostName":"h1","app":"worker","ipAddr":"10.0.0.7","status":"UP",` +
			`"port":{"$":8080,"@enabled":"true"},` +
			`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
			`"metadata":{"instanceId":"worker-7"}}}`
		xmlTail = `<hostName>h1</hostName><app>worker</app><ipAddr>10.0.0.7</ipAddr><status>UP</status>` +
			`<port enabled="true">8080</port>` +
			`<dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>` +
			`<metadata><instanceId>worker-7</instanceId></metadata></instance>`
	)
	for _, tc := range []struct {
		name, body     string
		xml            bool
		wantInstanceID string // the decoded field
		wantKey        string // ID(): what the registry keys it by
	}{
		{"json empty", `{"instance":{"instanceId":"",` + jsonTail, false, "", "h1"},
		{"json null", `{"instance":{"instanceId":null,` + jsonTail, false, "h1:worker-7", "h1:worker-7"},
		{"json absent", `{"instance":{` + jsonTail, false, "h1:worker-7", "h1:worker-7"},
		{"xml self-closing", `<instance><instanceId/>` + xmlTail, true, "", "h1"},
		{"xml empty element", `<instance><instanceId></instanceId>` + xmlTail, true, "", "h1"},
		{"xml absent", `<instance>` + xmlTail, true, "h1:worker-7", "h1:worker-7"},
		{"json given wins", `{"instance":{"instanceId":"own-id",` + jsonTail, false, "own-id", "own-id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decode := mustDecodeJSON
			if tc.xml {
				decode = mustDecodeXML
			}
			in := decode(t, tc.body)
			if in.InstanceID != tc.wantInstanceID || in.ID() != tc.wantKey {
				t.Errorf("InstanceID, ID() = %q, %q, want %q, %q", in.InstanceID, in.ID(), tc.wantInstanceID, tc.wantKey)
			}
			if v, _ := in.Metadata.Get("instanceId"); v != "worker-7" {
				t.Errorf("metadata instanceId = %q, want worker-7 kept", v)
			}
		})
	}
}
