package eureka

import (
	"testing"

	"github.com/hudl/fargo"

	"github.com/muster-registry/muster/registry"
)

// TestFargo drives the server with a real Eureka client library, hudl/fargo
// (used by go-kit), in both its JSON and XML modes.
func TestFargo(t *testing.T) {
	for _, mode := range []struct {
		name    string
		useJSON bool
	}{{"json", true}, {"xml", false}} {
		t.Run(mode.name, func(t *testing.T) {
			n := newTestNode(t)
			conn := fargo.NewConn(n.http.URL + "/eureka")
			conn.UseJson = mode.useJSON

			ins := &fargo.Instance{
				InstanceId: "host-1:billing:9000", HostName: "host-1", App: "billing", IPAddr: "10.0.0.7",
				VipAddress: "billing-vip", SecureVipAddress: "billing-svip", Status: fargo.UP,
				Port: 9000, PortEnabled: true, SecurePort: 9443, SecurePortEnabled: false,
				HomePageUrl: "http://host-1:9000/", StatusPageUrl: "http://host-1:9000/info", HealthCheckUrl: "http://host-1:9000/health",
				DataCenterInfo: fargo.DataCenterInfo{Name: fargo.MyOwn},
				LeaseInfo:      fargo.LeaseInfo{RenewalIntervalInSecs: 30, DurationInSecs: 90},
			}
			ins.SetMetadataString("zone", "zone-a")

			if err := conn.RegisterInstance(ins); err != nil {
				t.Fatalf("register: %v", err)
			}
			iv, ok := n.reg.Instance("BILLING", "host-1:billing:9000")
			if !ok {
				t.Fatal("registered instance not in the registry")
			}
			if iv.Port.Number != 9000 || !iv.Port.Enabled || iv.SecurePort.Enabled || iv.VIPAddress != "billing-vip" {
				t.Fatalf("stored %+v", iv.Instance)
			}
			if z, _ := iv.Metadata.Get("zone"); z != "zone-a" {
				t.Errorf("metadata zone = %q", z)
			}

			if err := conn.HeartBeatInstance(ins); err != nil {
				t.Fatalf("heartbeat: %v", err)
			}
			if n.reg.Stats().Renewals != 1 {
				t.Fatalf("renewals = %d, want 1", n.reg.Stats().Renewals)
			}
			ghost := *ins
			ghost.InstanceId = "ghost"
			err := conn.HeartBeatInstance(&ghost)
			if code, ok := fargo.HTTPResponseStatusCode(err); !ok || code != 404 {
				t.Fatalf("heartbeat of unknown instance: err %v, want HTTP 404", err)
			}

			app, err := conn.GetApp("BILLING")
			if err != nil {
				t.Fatalf("get app: %v", err)
			}
			if len(app.Instances) != 1 || app.Instances[0].Port != 9000 || app.Instances[0].Status != fargo.UP {
				t.Fatalf("get app returned %+v", app.Instances)
			}
			apps, err := conn.GetApps()
			if err != nil || len(apps) != 1 {
				t.Fatalf("get apps: %v, %d apps", err, len(apps))
			}
			got, err := conn.GetInstance("BILLING", "host-1:billing:9000")
			if err != nil || got.HostName != "host-1" || got.IPAddr != "10.0.0.7" {
				t.Fatalf("get instance: %v %+v", err, got)
			}

			if err := conn.UpdateInstanceStatus(ins, fargo.OUTOFSERVICE); err != nil {
				t.Fatalf("status OUT_OF_SERVICE: %v", err)
			}
			if iv, _ := n.reg.Instance("BILLING", ins.InstanceId); iv.Status != registry.StatusOutOfService {
				t.Fatalf("status = %s, want OUT_OF_SERVICE", iv.Status)
			}
			got, _ = conn.GetInstance("BILLING", ins.InstanceId)
			if got.Status != fargo.OUTOFSERVICE {
				t.Fatalf("client sees status %s", got.Status)
			}
			if err := conn.UpdateInstanceStatus(ins, fargo.UP); err != nil {
				t.Fatalf("status UP: %v", err)
			}
			if iv, _ := n.reg.Instance("BILLING", ins.InstanceId); iv.Status != registry.StatusUp {
				t.Fatalf("status = %s, want UP", iv.Status)
			}

			if err := conn.AddMetadataString(ins, "version", "1.2.3"); err != nil {
				t.Fatalf("metadata: %v", err)
			}
			got, _ = conn.GetInstance("BILLING", ins.InstanceId)
			if v, err := got.Metadata.GetString("version"); err != nil || v != "1.2.3" {
				t.Fatalf("metadata version = %q, %v", v, err)
			}

			vip, err := conn.GetInstancesByVIPAddress("billing-vip", false)
			if err != nil || len(vip) != 1 {
				t.Fatalf("vip lookup: %v, %d instances", err, len(vip))
			}
			svip, err := conn.GetInstancesByVIPAddress("billing-svip", true)
			if err != nil || len(svip) != 1 {
				t.Fatalf("secure vip lookup: %v, %d instances", err, len(svip))
			}
			none, err := conn.GetInstancesByVIPAddress("nobody", false)
			if err != nil || len(none) != 0 {
				t.Fatalf("vip lookup of unknown vip: %v, %d instances", err, len(none))
			}

			if err := conn.DeregisterInstance(ins); err != nil {
				t.Fatalf("deregister: %v", err)
			}
			if n.reg.Len() != 0 {
				t.Fatalf("%d instances left after deregister", n.reg.Len())
			}
		})
	}
}

// TestFargo_emptyInstanceID registers the body go-micro's Eureka plugin
// sends (fargo-shaped: instanceId empty, metadata instanceId, hostName h1)
// and heartbeats it as fargo does, under the hostName. Eureka keys an empty
// instanceId by the hostName; keying it h1:worker-7 (Spring's rule for an
// absent one) made every heartbeat a 404.
func TestFargo_emptyInstanceID(t *testing.T) {
	for _, mode := range []struct {
		name    string
		useJSON bool
	}{{"json", true}, {"xml", false}} {
		t.Run(mode.name, func(t *testing.T) {
			n := newTestNode(t)
			conn := fargo.NewConn(n.http.URL + "/eureka")
			conn.UseJson = mode.useJSON
			ins := &fargo.Instance{
				HostName: "h1", App: "worker", IPAddr: "10.0.0.7", VipAddress: "worker", Status: fargo.UP,
				Port: 8080, PortEnabled: true,
				DataCenterInfo: fargo.DataCenterInfo{Name: fargo.MyOwn},
				LeaseInfo:      fargo.LeaseInfo{RenewalIntervalInSecs: 30, DurationInSecs: 90},
			}
			ins.SetMetadataString("instanceId", "worker-7")
			if err := conn.RegisterInstance(ins); err != nil {
				t.Fatalf("register: %v", err)
			}
			if _, ok := n.reg.Instance("WORKER", "h1"); !ok {
				t.Fatal("instance not keyed by its hostName h1")
			}
			if _, ok := n.reg.Instance("WORKER", "h1:worker-7"); ok {
				t.Fatal("instance keyed h1:worker-7 (Spring's rule for an absent instanceId)")
			}
			for i := range 3 {
				if err := conn.HeartBeatInstance(ins); err != nil {
					t.Fatalf("heartbeat %d: %v", i, err)
				}
			}
			if got := n.reg.Stats().Renewals; got != 3 {
				t.Fatalf("renewals = %d, want 3", got)
			}
		})
	}
}
