package simclient

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
)

func TestAppName(t *testing.T) {
	tests := []struct {
		a, apps int
		want    string
	}{
		{0, 1, "APP-00"},
		{3, 10, "APP-03"},
		{99, 100, "APP-99"},
		{7, 101, "APP-007"},
		{100, 101, "APP-100"},
	}
	for _, tt := range tests {
		if got := appName(tt.a, tt.apps); got != tt.want {
			t.Errorf("appName(%d, %d) = %q, want %q", tt.a, tt.apps, got, tt.want)
		}
	}
}

func TestBuildInstances(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Instances, cfg.Apps, cfg.IDPrefix, cfg.Zone = 300, 3, "grp1", "b"
	cfg.RenewalInterval, cfg.LeaseDuration = 200*time.Millisecond, 2500*time.Millisecond
	insts := buildInstances(cfg, time.UnixMilli(1718000000000))

	in := insts[299].inst // the 99th instance of the third app
	if in.App != "APP-02" || in.ID != "grp1-app-02-99" || in.HostName != "grp1-app-02-99" || in.VIPAddress != "app-02" {
		t.Errorf("instance 299 = %s/%s host %s vip %s, want APP-02/grp1-app-02-99", in.App, in.ID, in.HostName, in.VIPAddress)
	}
	if in.RenewalInterval != time.Second || in.LeaseDuration != 3*time.Second {
		t.Errorf("lease = %s/%s, want 1s/3s (whole seconds, at least 1)", in.RenewalInterval, in.LeaseDuration)
	}
	if in.Zone != "b" || insts[299].lastDirty != 1718000000000 {
		t.Errorf("zone %q, lastDirtyTimestamp %d", in.Zone, insts[299].lastDirty)
	}
	ips := map[string]bool{}
	for _, x := range insts {
		if x.inst.Port != 8080 || x.inst.Status != client.StatusUp {
			t.Fatalf("%s: %+v", x.inst.ID, x.inst)
		}
		ips[x.inst.IPAddr] = true
	}
	if len(ips) != 300 {
		t.Errorf("%d distinct ipAddr, want 300", len(ips))
	}
}

// TestFleet_requestShapes pins what goes on the wire: the Java client's
// paths, query and headers.
func TestFleet_requestShapes(t *testing.T) {
	var mu sync.Mutex
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(ts.Close)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: ts.URL + "/eureka/"}}, func(c *Config) {
		c.Instances, c.Apps = 1, 1
		c.Now = func() time.Time { return time.UnixMilli(1718000000000) }
	}))
	f.registerAll(t.Context())
	f.renew(t.Context(), 0)
	f.cancelAll(t.Context())
	want := []string{
		"POST /eureka/apps/APP-00 application/json",
		"PUT /eureka/apps/APP-00/t-app-00-0?status=UP&lastDirtyTimestamp=1718000000000 ",
		"DELETE /eureka/apps/APP-00/t-app-00-0 ",
	}
	if len(got) != len(want) {
		t.Fatalf("requests = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %q, want %q", i, got[i], want[i])
		}
	}
}
