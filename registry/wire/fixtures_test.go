package wire_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/muster-registry/muster/registry"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// checkGolden compares got with testdata/name, or rewrites the file with
// -update. Goldens are written with a trailing newline for readability;
// the payload itself has none.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, append(bytes.Clone(got), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	want = bytes.TrimSuffix(want, []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\ngot:  %s\nwant: %s", name, got, want)
	}
}

func mustReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return bytes.TrimSuffix(b, []byte("\n"))
}

// Fixtures: a small registry in the canonical form a decoder produces, so
// that round trips compare equal.

func instanceOrdersA() *registry.Instance {
	return &registry.Instance{
		InstanceID:       "host-a:orders:8080",
		HostName:         "host-a",
		App:              "ORDERS",
		IPAddr:           "10.0.0.12",
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 443, Enabled: false},
		CountryID:        1,
		DataCenterInfo: registry.DataCenterInfo{
			Class: registry.DataCenterClassDefault,
			Name:  "MyOwn",
		},
		RenewalIntervalSecs: 30,
		LeaseDurationSecs:   90,
		Metadata: registry.Metadata{
			{Key: "management.port", Value: "8080"},
			{Key: "zone", Value: "zone1"},
		},
		HomePageURL:           "http://host-a:8080/",
		StatusPageURL:         "http://host-a:8080/actuator/info",
		HealthCheckURL:        "http://host-a:8080/actuator/health",
		VIPAddress:            "orders",
		SecureVIPAddress:      "orders",
		LastUpdatedTimestamp:  1718000000130,
		LastDirtyTimestamp:    1717999999000,
		ActionType:            registry.ActionAdded,
		RegistrationTimestamp: 1718000000000,
		ServiceUpTimestamp:    1718000000123,
	}
}

func instanceOrdersB() *registry.Instance {
	return &registry.Instance{
		InstanceID:       "host-b:orders:8080",
		HostName:         "host-b",
		App:              "ORDERS",
		IPAddr:           "10.0.0.13",
		Sid:              "s-17",
		Status:           registry.StatusDown,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: 8080, Enabled: true},
		SecurePort:       registry.Port{Number: 8443, Enabled: true},
		CountryID:        1,
		DataCenterInfo: registry.DataCenterInfo{
			Class: registry.DataCenterClassDefault,
			Name:  "MyOwn",
		},
		RenewalIntervalSecs:   10,
		LeaseDurationSecs:     30,
		AppGroupName:          "SHOP",
		HomePageURL:           "http://host-b:8080/",
		StatusPageURL:         "http://host-b:8080/actuator/info",
		HealthCheckURL:        "http://host-b:8080/actuator/health",
		SecureHealthCheckURL:  "https://host-b:8443/actuator/health",
		VIPAddress:            "orders,orders-v2",
		SecureVIPAddress:      "orders",
		LastUpdatedTimestamp:  1718000000500,
		LastDirtyTimestamp:    1718000000400,
		ActionType:            registry.ActionModified,
		RegistrationTimestamp: 1718000000450,
		ServiceUpTimestamp:    1718000000460,
	}
}

// instancePaymentsC runs on EC2: no instanceId (its id is the EC2
// instance-id), an out-of-service override, an ASG, and metadata with an
// underscore key and characters that need escaping.
func instancePaymentsC() *registry.Instance {
	return &registry.Instance{
		HostName:         "ip-10-1-2-3.ec2.internal",
		App:              "PAYMENTS",
		IPAddr:           "10.1.2.3",
		Status:           registry.StatusOutOfService,
		OverriddenStatus: registry.StatusOutOfService,
		Port:             registry.Port{Number: 9090, Enabled: true},
		SecurePort:       registry.Port{Number: 7002, Enabled: false},
		CountryID:        1,
		DataCenterInfo: registry.DataCenterInfo{
			Class: registry.DataCenterClassAmazon,
			Name:  "Amazon",
			Metadata: registry.Metadata{
				{Key: "availability-zone", Value: "us-east-1a"},
				{Key: "instance-id", Value: "i-0abc123"},
				{Key: "local-ipv4", Value: "10.1.2.3"},
			},
		},
		RenewalIntervalSecs: 30,
		LeaseDurationSecs:   90,
		Metadata: registry.Metadata{
			{Key: "git_commit", Value: "4f2a9c1"},
			{Key: "owner", Value: `Ops & "Payments" <pay@example.com>`},
		},
		HomePageURL:           "http://10.1.2.3:9090/?a=1&b=2",
		VIPAddress:            "payments",
		ASGName:               "payments-v042",
		LastUpdatedTimestamp:  1718000001000,
		LastDirtyTimestamp:    1718000000900,
		ActionType:            registry.ActionModified,
		RegistrationTimestamp: 1718000000950,
		EvictionTimestamp:     0,
		ServiceUpTimestamp:    1718000000960,
	}
}

func fullApps() []registry.AppView {
	return []registry.AppView{
		{Name: "ORDERS", Instances: []registry.InstanceView{
			{Instance: instanceOrdersA(), LastRenewalTimestamp: 1718000150000},
			{Instance: instanceOrdersB(), LastRenewalTimestamp: 1718000150100},
		}},
		{Name: "PAYMENTS", Instances: []registry.InstanceView{
			{Instance: instancePaymentsC(), LastRenewalTimestamp: 1718000150200},
		}},
	}
}

// deltaApps is a delta with one change of each kind.
func deltaApps() []registry.AppView {
	added := instanceOrdersA()
	modified := instanceOrdersB()
	deleted := instancePaymentsC()
	deleted.ActionType = registry.ActionDeleted
	return []registry.AppView{
		{Name: "ORDERS", Instances: []registry.InstanceView{
			{Instance: added, LastRenewalTimestamp: 1718000150000},
			{Instance: modified, LastRenewalTimestamp: 1718000150100},
		}},
		{Name: "PAYMENTS", Instances: []registry.InstanceView{
			{Instance: deleted, LastRenewalTimestamp: 1718000150200},
		}},
	}
}
