package replication_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
)

// A cancel carries the cancelled instance's lease to Muster peers only:
// a Java Eureka server's ReplicationInstance has no such property.
func TestEncodeBatch_cancelCarriesLeaseToMusterPeers(t *testing.T) {
	in := registrytest.NewInstance("APP", "i-1", registrytest.WithLeaseDuration(3600))
	in.WriteVersion = 42
	task := replication.Task{Action: registry.ActionCancel, Key: registry.InstanceKey{App: "APP", ID: "i-1"}, Instance: in}
	body, err := replication.EncodeBatch(replication.Batch{Tasks: []replication.Task{task}, Versioned: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"version":42,"leaseDurationInSecs":3600`) {
		t.Fatalf("versioned cancel: %s", body)
	}
	body, err = replication.EncodeBatch(replication.Batch{Tasks: []replication.Task{task}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "leaseDurationInSecs") || strings.Contains(string(body), "version") {
		t.Fatalf("cancel to a Java peer: %s", body)
	}
}

// A node that never had the instance keeps the cancel's tombstone for the
// lease the cancel carries (capped at a day), the default without one; a
// value that is not an unsigned number fails its item (400), which
// changes nothing.
func TestReceiver_cancelOfUnknownInstanceKeepsItsLease(t *testing.T) {
	clock := registrytest.NewClock()
	cfg := registry.DefaultConfig()
	cfg.Now = clock.Now
	reg, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := replication.NewReceiver(reg, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	// A version another node's clock made (the cancel's, on its node).
	src, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	made, err := src.Apply(registry.RegisterOp(registrytest.NewInstance("A", "x")))
	if err != nil {
		t.Fatal(err)
	}
	v := strconv.FormatUint(made.WriteVersion, 10)
	resp, err := rc.Handle([]byte(`{"replicationList":[
	  {"appName":"A","id":"hour","action":"Cancel","version":` + v + `,"leaseDurationInSecs":3600},
	  {"appName":"A","id":"none","action":"Cancel","version":` + v + `},
	  {"appName":"A","id":"huge","action":"Cancel","version":` + v + `,"leaseDurationInSecs":4000000000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(resp) != `{"responseList":[{"statusCode":404},{"statusCode":404},{"statusCode":404}]}` {
		t.Fatalf("receiver answered %s", resp)
	}
	grace := cfg.TombstoneGrace
	want := map[string]time.Duration{"hour": time.Hour + grace, "none": cfg.DefaultLeaseDuration + grace, "huge": 24*time.Hour + grace}
	got := map[string]time.Duration{}
	for _, ts := range reg.LiveTombstones() {
		got[ts.Key.ID] = ts.TTL
	}
	for id, d := range want {
		if got[id] != d {
			t.Errorf("%s: tombstone kept %s, want %s", id, got[id], d)
		}
	}

	for _, bad := range []string{`-5`, `"x"`, `1.5`} {
		resp, err := rc.Handle([]byte(`{"replicationList":[{"appName":"A","id":"bad","action":"Cancel","version":` + v + `,"leaseDurationInSecs":` + bad + `}]}`))
		if err != nil || string(resp) != `{"responseList":[{"statusCode":400}]}` {
			t.Errorf("leaseDurationInSecs %s: %s, %v", bad, resp, err)
		}
		if _, ok := reg.Tombstone("A", "bad"); ok {
			t.Errorf("leaseDurationInSecs %s left a tombstone", bad)
		}
	}
}
