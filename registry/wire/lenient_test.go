package wire_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// baseInstance is what the base bodies below decode to.
func baseInstance() *registry.Instance {
	return &registry.Instance{
		HostName:         "h",
		App:              "A",
		IPAddr:           "1.2.3.4",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 7001, Enabled: true},
		SecurePort:       registry.Port{Number: 7002},
		CountryID:        1,
		DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
	}
}

const (
	baseJSON = `{"instance":{"hostName":"h","app":"a","ipAddr":"1.2.3.4","dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}%s}}`
	baseXML  = `<instance><hostName>h</hostName><app>a</app><ipAddr>1.2.3.4</ipAddr><dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>%s</instance>`
)

func TestDecodeInstanceJSON_lenient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string                   // fields added to baseJSON
		want  func(*registry.Instance) // changes to baseInstance
	}{
		{"port object", `,"port":{"$":8080,"@enabled":"true"}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port string number bool flag", `,"port":{"$":"8080","@enabled":true}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port bare number", `,"port":8080`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port bare string", `,"port":"8080"`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port disabled", `,"port":{"$":8080,"@enabled":"false"}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080} }},
		{"port disabled bool", `,"port":{"@enabled":false,"$":8080}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080} }},
		{"port without flag", `,"port":{"$":8080}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port odd flag means enabled", `,"port":{"$":8080,"@enabled":"yes"}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port float", `,"port":{"$":8080.0}`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port empty string is absent", `,"port":{"$":""}`, func(in *registry.Instance) {}},
		{"port null", `,"port":null`, func(in *registry.Instance) {}},
		{"secure port enabled", `,"securePort":{"$":443,"@enabled":"true"}`, func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 443, Enabled: true} }},
		{"secure port enabled bool", `,"securePort":{"$":"443","@enabled":true}`, func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 443, Enabled: true} }},
		{"secure port odd flag means disabled", `,"securePort":{"$":443,"@enabled":"yes"}`, func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 443} }},
		{"secure port bare", `,"securePort":443`, func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 443} }},
		{"countryId string", `,"countryId":"2"`, func(in *registry.Instance) { in.CountryID = 2 }},
		{"countryId null", `,"countryId":null`, func(in *registry.Instance) {}},
		{"status lower case", `,"status":"down"`, func(in *registry.Instance) { in.Status = registry.StatusDown }},
		{"status unknown name", `,"status":"SLEEPING"`, func(in *registry.Instance) { in.Status = registry.StatusUnknown }},
		{"status empty", `,"status":""`, func(in *registry.Instance) { in.Status = registry.StatusUnknown }},
		{"status null", `,"status":null`, func(in *registry.Instance) {}},
		{"overriddenStatus", `,"overriddenStatus":"OUT_OF_SERVICE"`, func(in *registry.Instance) { in.OverriddenStatus = registry.StatusOutOfService }},
		{"overriddenstatus legacy", `,"overriddenstatus":"DOWN"`, func(in *registry.Instance) { in.OverriddenStatus = registry.StatusDown }},
		{"timestamps as strings", `,"lastUpdatedTimestamp":"1718000000000","lastDirtyTimestamp":"1717999999000"`, func(in *registry.Instance) {
			in.LastUpdatedTimestamp, in.LastDirtyTimestamp = 1718000000000, 1717999999000
		}},
		{"timestamps as numbers", `,"lastUpdatedTimestamp":1718000000000,"lastDirtyTimestamp":1.717999999e12`, func(in *registry.Instance) {
			in.LastUpdatedTimestamp, in.LastDirtyTimestamp = 1718000000000, 1717999999000
		}},
		{"leaseInfo strings", `,"leaseInfo":{"renewalIntervalInSecs":"10","durationInSecs":"30","registrationTimestamp":"5","evictionTimestamp":6,"serviceUpTimestamp":"7","unknown":{}}`, func(in *registry.Instance) {
			in.RenewalIntervalSecs, in.LeaseDurationSecs = 10, 30
			in.RegistrationTimestamp, in.EvictionTimestamp, in.ServiceUpTimestamp = 5, 6, 7
		}},
		{"leaseInfo null", `,"leaseInfo":null`, func(in *registry.Instance) {}},
		{"coordinating true", `,"isCoordinatingDiscoveryServer":true`, func(in *registry.Instance) { in.IsCoordinatingDiscoveryServer = true }},
		{"coordinating string", `,"isCoordinatingDiscoveryServer":"TRUE"`, func(in *registry.Instance) { in.IsCoordinatingDiscoveryServer = true }},
		{"coordinating number", `,"isCoordinatingDiscoveryServer":1`, func(in *registry.Instance) { in.IsCoordinatingDiscoveryServer = true }},
		{"coordinating false string", `,"isCoordinatingDiscoveryServer":"false"`, func(in *registry.Instance) {}},
		{"sid na", `,"sid":"na"`, func(in *registry.Instance) {}},
		{"sid set", `,"sid":"s1"`, func(in *registry.Instance) { in.Sid = "s1" }},
		{"appGroupName upper-cased", `,"appGroupName":"shop"`, func(in *registry.Instance) { in.AppGroupName = "SHOP" }},
		{"actionType lower case", `,"actionType":"deleted"`, func(in *registry.Instance) { in.ActionType = registry.ActionDeleted }},
		{"actionType unknown dropped", `,"actionType":"RENAMED"`, func(in *registry.Instance) {}},
		{"metadata empty marker", `,"metadata":{"@class":"java.util.Collections$EmptyMap"}`, func(in *registry.Instance) {}},
		{"metadata scalars", `,"metadata":{"b":true,"n":12,"f":-1.5e3,"s":"x","z":null}`, func(in *registry.Instance) {
			in.Metadata = registry.Metadata{{Key: "b", Value: "true"}, {Key: "f", Value: "-1.5e3"}, {Key: "n", Value: "12"}, {Key: "s", Value: "x"}}
		}},
		{"metadata repeated key", `,"metadata":{"k":"1","j":"x","k":"2"}`, func(in *registry.Instance) {
			in.Metadata = registry.Metadata{{Key: "j", Value: "x"}, {Key: "k", Value: "2"}}
		}},
		{"metadata escapes", `,"metadata":{"k\u00e9y":"a\"b\\c\/d\n\ud83d\ude00"}`, func(in *registry.Instance) {
			in.Metadata = registry.Metadata{{Key: "kéy", Value: "a\"b\\c/d\n😀"}}
		}},
		{"lone surrogate", `,"hostName":"x\ud800y"`, func(in *registry.Instance) { in.HostName = "x\uFFFDy" }},
		{"invalid UTF-8", ",\"hostName\":\"x\xffy\"", func(in *registry.Instance) { in.HostName = "x\uFFFDy" }},
		{"string from number", `,"vipAddress":123`, func(in *registry.Instance) { in.VIPAddress = "123" }},
		{"unknown fields", `,"foo":{"bar":[1,2,{"x":null}]},"identifyingAttribute":"EC2_INSTANCE_ID"`, func(in *registry.Instance) {}},
		{"later field wins", `,"hostName":"h2"`, func(in *registry.Instance) { in.HostName = "h2" }},
		{"amazon any case", `,"dataCenterInfo":{"name":"amazon","metadata":{"instance-id":"i-9"}}`, func(in *registry.Instance) {
			in.DataCenterInfo = registry.DataCenterInfo{Class: registry.DataCenterClassAmazon, Name: "Amazon",
				Metadata: registry.Metadata{{Key: "instance-id", Value: "i-9"}}}
		}},
		{"netflix keeps no metadata", `,"dataCenterInfo":{"@class":"x.Y","name":"Netflix","metadata":{"a":"b"}}`, func(in *registry.Instance) {
			in.DataCenterInfo = registry.DataCenterInfo{Class: "x.Y", Name: "Netflix"}
		}},
		{"white space", " \n\t,\r\n \"countryId\" : 3 ", func(in *registry.Instance) { in.CountryID = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(baseJSON, tc.extra)
			got, err := wire.DecodeInstanceJSON([]byte(body))
			if err != nil {
				t.Fatalf("DecodeInstanceJSON(%s): %v", body, err)
			}
			want := baseInstance()
			tc.want(want)
			mustEqualInstance(t, got, want)
		})
	}
}

func TestDecodeInstanceXML_lenient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra string
		want  func(*registry.Instance)
	}{
		{"port", `<port enabled="true">8080</port>`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port without attribute", `<port>8080</port>`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"port disabled", `<port enabled="false">8080</port>`, func(in *registry.Instance) { in.Port = registry.Port{Number: 8080} }},
		{"port spaces", "<port enabled=\"true\">\n  8080\n</port>", func(in *registry.Instance) { in.Port = registry.Port{Number: 8080, Enabled: true} }},
		{"secure port without attribute", `<securePort>443</securePort>`, func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 443} }},
		{"secure port enabled", `<securePort enabled="true">443</securePort>`, func(in *registry.Instance) { in.SecurePort = registry.Port{Number: 443, Enabled: true} }},
		{"empty number is absent", `<countryId></countryId><port/>`, func(in *registry.Instance) {}},
		{"overriddenStatus camel case", `<overriddenStatus>DOWN</overriddenStatus>`, func(in *registry.Instance) { in.OverriddenStatus = registry.StatusDown }},
		{"status unknown name", `<status>NAPPING</status>`, func(in *registry.Instance) { in.Status = registry.StatusUnknown }},
		{"metadata names", `<metadata><a__b>1</a__b><_-x>2</_-x><_.0038080>3</_.0038080><plain>&lt;&amp;&gt;</plain><c><![CDATA[<x>]]></c></metadata>`, func(in *registry.Instance) {
			in.Metadata = registry.Metadata{{Key: "$x", Value: "2"}, {Key: "8080", Value: "3"}, {Key: "a_b", Value: "1"}, {Key: "c", Value: "<x>"}, {Key: "plain", Value: "<&>"}}
		}},
		{"empty metadata", `<metadata class="java.util.Collections$EmptyMap"/>`, func(in *registry.Instance) {}},
		{"leaseInfo legacy and unknown", `<leaseInfo><renewalIntervalInSecs>10</renewalIntervalInSecs><renewalTimestamp>5</renewalTimestamp><x><y/></x></leaseInfo>`, func(in *registry.Instance) {
			in.RenewalIntervalSecs = 10
		}},
		{"coordinating", `<isCoordinatingDiscoveryServer>true</isCoordinatingDiscoveryServer>`, func(in *registry.Instance) { in.IsCoordinatingDiscoveryServer = true }},
		{"comments and unknown elements", `<!-- c --><foo a="b"><bar>baz</bar></foo><vipAddress>v<!-- x -->ip</vipAddress>`, func(in *registry.Instance) { in.VIPAddress = "vip" }},
		{"amazon in lower case", `<dataCenterInfo><name>amazon</name><metadata><instance-id>i-7</instance-id></metadata></dataCenterInfo>`, func(in *registry.Instance) {
			in.DataCenterInfo = registry.DataCenterInfo{Class: registry.DataCenterClassAmazon, Name: "Amazon", Metadata: registry.Metadata{{Key: "instance-id", Value: "i-7"}}}
		}},
		{"timestamps", `<lastUpdatedTimestamp>1718000000000</lastUpdatedTimestamp><lastDirtyTimestamp> 1717999999000 </lastDirtyTimestamp>`, func(in *registry.Instance) {
			in.LastUpdatedTimestamp, in.LastDirtyTimestamp = 1718000000000, 1717999999000
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(baseXML, tc.extra)
			got, err := wire.DecodeInstanceXML([]byte(body))
			if err != nil {
				t.Fatalf("DecodeInstanceXML(%s): %v", body, err)
			}
			want := baseInstance()
			tc.want(want)
			mustEqualInstance(t, got, want)
		})
	}
}

// TestDecodeInstanceXML_prolog accepts a declaration, a doctype and
// comments around the root element.
func TestDecodeInstanceXML_prolog(t *testing.T) {
	body := "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE instance>\n<!-- hi -->\n" + fmt.Sprintf(baseXML, "") + "\n<!-- bye -->\n"
	mustEqualInstance(t, mustDecodeXML(t, body), baseInstance())
}

// TestDecodeApplicationsJSON_singleObjects: application and instance may be
// single objects instead of arrays, and numbers where strings are usual.
func TestDecodeApplicationsJSON_singleObjects(t *testing.T) {
	body := `{"applications":{"versions__delta":3,"apps__hashcode":"UP_1_","application":{"name":"A","instance":` +
		`{"hostName":"h","app":"a","ipAddr":"1.2.3.4","dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
		`"leaseInfo":{"renewalTimestamp":77},"actionType":"ADDED"}}}}`
	got, err := wire.DecodeApplicationsJSON([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in := baseInstance()
	in.ActionType = registry.ActionAdded
	want := &wire.Applications{VersionsDelta: "3", Hashcode: "UP_1_", Apps: []registry.AppView{
		{Name: "A", Instances: []registry.InstanceView{{Instance: in, LastRenewalTimestamp: 77}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestDecodeApplicationsJSON_nullsAndEmpties(t *testing.T) {
	for _, body := range []string{
		`{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`,
		`{"applications":{"versions__delta":"1","apps__hashcode":"","application":null}}`,
		`{"applications":{"versions__delta":"1","apps__hashcode":""}}`,
	} {
		got, err := wire.DecodeApplicationsJSON([]byte(body))
		if err != nil {
			t.Errorf("DecodeApplicationsJSON(%s): %v", body, err)
			continue
		}
		if got.VersionsDelta != "1" || got.Hashcode != "" || len(got.Apps) != 0 {
			t.Errorf("DecodeApplicationsJSON(%s) = %+v, want version 1 and no apps", body, got)
		}
	}
	got, err := wire.DecodeApplicationsJSON([]byte(`{"applications":{"application":[{"name":"A","instance":null},{"name":"B"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Apps) != 2 || got.Apps[0].Name != "A" || len(got.Apps[0].Instances) != 0 {
		t.Errorf("got %+v, want apps A and B without instances", got)
	}
}

// TestDecodeApplicationsXML_prettyPrinted decodes an XML document with the
// white space of Eureka's pretty printer.
func TestDecodeApplicationsXML_prettyPrinted(t *testing.T) {
	body := `<applications>
  <versions__delta>1</versions__delta>
  <apps__hashcode>UP_1_</apps__hashcode>
  <application>
    <name>A</name>
    <instance>
      <hostName>h</hostName>
      <app>a</app>
      <ipAddr>1.2.3.4</ipAddr>
      <dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo">
        <name>MyOwn</name>
      </dataCenterInfo>
      <leaseInfo>
        <lastRenewalTimestamp>12</lastRenewalTimestamp>
      </leaseInfo>
    </instance>
  </application>
</applications>`
	got, err := wire.DecodeApplicationsXML([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.Applications{VersionsDelta: "1", Hashcode: "UP_1_", Apps: []registry.AppView{
		{Name: "A", Instances: []registry.InstanceView{{Instance: baseInstance(), LastRenewalTimestamp: 12}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
