package wire_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// benchRegistry builds a registry of n instances, 50 per app, shaped like
// Spring Boot services: three metadata entries, URLs, VIPs, and every
// tenth instance on EC2.
func benchRegistry(n int) []registry.AppView {
	const perApp = 50
	var apps []registry.AppView
	for i := 0; i < n; i++ {
		if i%perApp == 0 {
			apps = append(apps, registry.AppView{Name: fmt.Sprintf("SERVICE-%04d", i/perApp)})
		}
		app := &apps[len(apps)-1]
		host := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i>>16&255, i>>8&255, i&255)
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		vip := fmt.Sprintf("service-%04d", i/perApp)
		in := &registry.Instance{
			InstanceID:       host + ":" + vip + ":8080",
			HostName:         host,
			App:              app.Name,
			IPAddr:           ip,
			Status:           registry.StatusUp,
			OverriddenStatus: registry.StatusUnknown,
			Port:             registry.Port{Number: 8080, Enabled: true},
			SecurePort:       registry.Port{Number: 443},
			CountryID:        1,
			DataCenterInfo:   registry.DataCenterInfo{Class: registry.DataCenterClassDefault, Name: "MyOwn"},
			Metadata: registry.Metadata{
				{Key: "management.port", Value: "8081"},
				{Key: "version", Value: "1.4." + strconv.Itoa(i%7)},
				{Key: "zone", Value: "eu-west-1a"},
			},
			HomePageURL:           "http://" + host + ":8080/",
			StatusPageURL:         "http://" + host + ":8081/actuator/info",
			HealthCheckURL:        "http://" + host + ":8081/actuator/health",
			VIPAddress:            vip,
			SecureVIPAddress:      vip,
			LastUpdatedTimestamp:  1718000000000 + int64(i),
			LastDirtyTimestamp:    1717999990000 + int64(i),
			ActionType:            registry.ActionAdded,
			RegistrationTimestamp: 1718000000000 + int64(i),
			ServiceUpTimestamp:    1718000000100 + int64(i),
		}
		if i%10 == 0 {
			in.DataCenterInfo = registry.DataCenterInfo{Class: registry.DataCenterClassAmazon, Name: "Amazon", Metadata: registry.Metadata{
				{Key: "availability-zone", Value: "eu-west-1a"},
				{Key: "instance-id", Value: fmt.Sprintf("i-%012x", i)},
				{Key: "local-ipv4", Value: ip},
			}}
		}
		app.Instances = append(app.Instances, registry.InstanceView{Instance: in, LastRenewalTimestamp: 1718000150000 + int64(i)})
	}
	return apps
}

var benchSizes = []int{10_000, 100_000}

func BenchmarkAppendApplicationsJSON(b *testing.B) {
	benchmarkAppend(b, wire.AppendApplicationsJSON)
}

func BenchmarkAppendApplicationsXML(b *testing.B) {
	benchmarkAppend(b, wire.AppendApplicationsXML)
}

// benchmarkAppend measures a full-registry encode into a reused buffer (the
// steady state when a caller recycles buffers: no allocation) and into a
// nil one (one allocation of the whole output, whose page faults and
// zeroing cost about as much as the encoding on our VMs).
func benchmarkAppend(b *testing.B, appendApps func([]byte, []registry.AppView, string, string) []byte) {
	for _, n := range benchSizes {
		apps := benchRegistry(n)
		hash := registry.HashcodeOf(apps)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.Run("reused", func(b *testing.B) {
				buf := appendApps(nil, apps, "1", hash)
				b.SetBytes(int64(len(buf)))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					buf = appendApps(buf[:0], apps, "1", hash)
				}
				b.ReportMetric(float64(len(buf))/float64(n), "B/instance")
			})
			b.Run("fresh", func(b *testing.B) {
				b.ReportAllocs()
				var out []byte
				for b.Loop() {
					out = appendApps(nil, apps, "1", hash)
				}
				b.SetBytes(int64(len(out)))
			})
		})
	}
}

// BenchmarkEncodingJSONReference encodes the same document with
// encoding/json from ready-made structs of the same shape, as a yardstick
// measured side by side with BenchmarkAppendApplicationsJSON (the machines
// are noisy, so compare ratios, not lone figures).
func BenchmarkEncodingJSONReference(b *testing.B) {
	for _, n := range benchSizes {
		doc := referenceDoc(benchRegistry(n))
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				var err error
				if out, err = json.Marshal(doc); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(out)))
		})
	}
}

func BenchmarkDecodeInstanceJSON(b *testing.B) {
	body := []byte(springBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeInstanceJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeInstanceXML(b *testing.B) {
	body := wire.AppendInstanceXML(nil, registry.InstanceView{Instance: instanceOrdersA()})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := wire.DecodeInstanceXML(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeApplicationsJSON(b *testing.B) {
	apps := benchRegistry(10_000)
	body := wire.AppendApplicationsJSON(nil, apps, "1", registry.HashcodeOf(apps))
	b.Run("10k", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.DecodeApplicationsJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecodeApplicationsXML(b *testing.B) {
	apps := benchRegistry(10_000)
	body := wire.AppendApplicationsXML(nil, apps, "1", registry.HashcodeOf(apps))
	b.Run("10k", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.DecodeApplicationsXML(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Reference types for encoding/json, mirroring Eureka's JSON shape.
type (
	refDoc struct {
		Applications refApps `json:"applications"`
	}
	refApps struct {
		VersionsDelta string   `json:"versions__delta"`
		AppsHashcode  string   `json:"apps__hashcode"`
		Application   []refApp `json:"application"`
	}
	refApp struct {
		Name     string        `json:"name"`
		Instance []refInstance `json:"instance"`
	}
	refPort struct {
		Number  int    `json:"$"`
		Enabled string `json:"@enabled"`
	}
	refDataCenter struct {
		Class    string            `json:"@class"`
		Name     string            `json:"name"`
		Metadata map[string]string `json:"metadata,omitempty"`
	}
	refLease struct {
		RenewalIntervalInSecs int   `json:"renewalIntervalInSecs"`
		DurationInSecs        int   `json:"durationInSecs"`
		RegistrationTimestamp int64 `json:"registrationTimestamp"`
		LastRenewalTimestamp  int64 `json:"lastRenewalTimestamp"`
		EvictionTimestamp     int64 `json:"evictionTimestamp"`
		ServiceUpTimestamp    int64 `json:"serviceUpTimestamp"`
	}
	refInstance struct {
		InstanceID                    string            `json:"instanceId,omitempty"`
		HostName                      string            `json:"hostName"`
		App                           string            `json:"app"`
		IPAddr                        string            `json:"ipAddr"`
		Status                        string            `json:"status"`
		OverriddenStatus              string            `json:"overriddenStatus"`
		Port                          refPort           `json:"port"`
		SecurePort                    refPort           `json:"securePort"`
		CountryID                     int               `json:"countryId"`
		DataCenterInfo                refDataCenter     `json:"dataCenterInfo"`
		LeaseInfo                     refLease          `json:"leaseInfo"`
		Metadata                      map[string]string `json:"metadata"`
		HomePageURL                   string            `json:"homePageUrl,omitempty"`
		StatusPageURL                 string            `json:"statusPageUrl,omitempty"`
		HealthCheckURL                string            `json:"healthCheckUrl,omitempty"`
		VIPAddress                    string            `json:"vipAddress,omitempty"`
		SecureVIPAddress              string            `json:"secureVipAddress,omitempty"`
		IsCoordinatingDiscoveryServer string            `json:"isCoordinatingDiscoveryServer"`
		LastUpdatedTimestamp          string            `json:"lastUpdatedTimestamp"`
		LastDirtyTimestamp            string            `json:"lastDirtyTimestamp"`
		ActionType                    string            `json:"actionType,omitempty"`
	}
)

func referenceDoc(apps []registry.AppView) refDoc {
	doc := refDoc{Applications: refApps{VersionsDelta: "1", AppsHashcode: registry.HashcodeOf(apps)}}
	for _, app := range apps {
		ra := refApp{Name: app.Name}
		for _, iv := range app.Instances {
			in := iv.Instance
			md := map[string]string{}
			for _, kv := range in.Metadata {
				md[kv.Key] = kv.Value
			}
			var dcmd map[string]string
			if in.DataCenterInfo.Name == "Amazon" {
				dcmd = map[string]string{}
				for _, kv := range in.DataCenterInfo.Metadata {
					dcmd[kv.Key] = kv.Value
				}
			}
			ra.Instance = append(ra.Instance, refInstance{
				InstanceID: in.InstanceID, HostName: in.HostName, App: in.App, IPAddr: in.IPAddr,
				Status: string(in.Status), OverriddenStatus: string(in.OverriddenStatus),
				Port:           refPort{in.Port.Number, strconv.FormatBool(in.Port.Enabled)},
				SecurePort:     refPort{in.SecurePort.Number, strconv.FormatBool(in.SecurePort.Enabled)},
				CountryID:      in.CountryID,
				DataCenterInfo: refDataCenter{in.DataCenterInfo.Class, in.DataCenterInfo.Name, dcmd},
				LeaseInfo: refLease{30, 90, in.RegistrationTimestamp, iv.LastRenewalTimestamp,
					in.EvictionTimestamp, in.ServiceUpTimestamp},
				Metadata:    md,
				HomePageURL: in.HomePageURL, StatusPageURL: in.StatusPageURL, HealthCheckURL: in.HealthCheckURL,
				VIPAddress: in.VIPAddress, SecureVIPAddress: in.SecureVIPAddress,
				IsCoordinatingDiscoveryServer: "false",
				LastUpdatedTimestamp:          strconv.FormatInt(in.LastUpdatedTimestamp, 10),
				LastDirtyTimestamp:            strconv.FormatInt(in.LastDirtyTimestamp, 10),
				ActionType:                    string(in.ActionType),
			})
		}
		doc.Applications.Application = append(doc.Applications.Application, ra)
	}
	return doc
}

// TestBenchRegistry_referenceMatches checks that the reference encoding
// has the same content as ours, so the comparison is fair.
func TestBenchRegistry_referenceMatches(t *testing.T) {
	apps := benchRegistry(200)
	ours := wire.AppendApplicationsJSON(nil, apps, "1", registry.HashcodeOf(apps))
	ref, err := json.Marshal(referenceDoc(apps))
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(ours, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ref, &b); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("reference document differs from ours")
	}
}

// BenchmarkReadApplicationsJSON is syncUp's streaming decode of a peer's
// registry of 10k instances.
func BenchmarkReadApplicationsJSON(b *testing.B) {
	apps := benchRegistry(10_000)
	body := wire.AppendApplicationsJSON(nil, apps, "1", registry.HashcodeOf(apps))
	b.Run("10k", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if err := wire.ReadApplicationsJSON(bytes.NewReader(body), func(registry.AppView) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
