package client_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func stored(t *testing.T, n *node, app, id string) (registry.InstanceView, bool) {
	t.Helper()
	return n.reg.Instance(app, id)
}

// TestRegistration_lifecycle runs one registration against a real Muster
// node: register, heartbeat on the lease interval, re-register after the
// node lost the instance, cancel on Close.
func TestRegistration_lifecycle(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	c, clk := newClient(t, servers(n.url))
	ctx := ctxT(t)

	in := testInstance("orders", 0)
	in.Metadata = map[string]string{"version": "1.2"}
	in.SecurePort = 8443
	r, err := c.Register(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	id := r.Instance().ID
	if id != "host-a:orders:8080" {
		t.Fatalf("default id = %q, want host-a:orders:8080", id)
	}
	iv, ok := stored(t, n, "ORDERS", id)
	if !ok {
		t.Fatal("instance not registered on the node")
	}
	if iv.HostName != "host-a" || iv.IPAddr != "10.0.0.1" || iv.Port != (registry.Port{Number: 8080, Enabled: true}) ||
		iv.SecurePort != (registry.Port{Number: 8443, Enabled: true}) || iv.Status != registry.StatusUp ||
		iv.RenewalIntervalSecs != 30 || iv.LeaseDurationSecs != 90 || iv.VIPAddress != "orders" {
		t.Fatalf("stored %+v", iv.Instance)
	}
	if z, _ := iv.Metadata.Get("zone"); z != "zone-a" {
		t.Errorf("metadata zone = %q, want zone-a", z)
	}
	if v, _ := iv.Metadata.Get("version"); v != "1.2" {
		t.Errorf("metadata version = %q, want 1.2", v)
	}

	// Heartbeats go out on the lease interval, not before.
	clk.BlockUntil(t, 1)
	clk.Advance(29 * time.Second)
	if got := n.reg.Stats().Renewals; got != 0 {
		t.Fatalf("renewals after 29 s = %d, want 0", got)
	}
	clk.Advance(time.Second)
	testwait.True(t, waitTimeout, "first heartbeat", func() bool { return n.reg.Stats().Renewals == 1 })
	clk.BlockUntil(t, 1)
	clk.Advance(30 * time.Second)
	testwait.True(t, waitTimeout, "second heartbeat", func() bool { return n.reg.Stats().Renewals == 2 })

	// The node loses the instance: the next heartbeat gets 404 and the
	// registration registers again.
	if _, err := n.reg.Apply(registry.CancelOp("ORDERS", id)); err != nil {
		t.Fatal(err)
	}
	clk.BlockUntil(t, 1)
	clk.Advance(30 * time.Second)
	testwait.True(t, waitTimeout, "re-registration", func() bool { _, ok := n.reg.Instance("ORDERS", id); return ok })
	// The node stores the instance before the client has read its answer
	// and counted the registration: wait for the count itself.
	testwait.True(t, waitTimeout, "re-registration counted", func() bool { s := c.Stats(); return s.ReRegistrations == 1 && s.Registrations == 2 })
	if s := c.Stats(); s.Registrations != 2 || s.Heartbeats != 2 {
		t.Errorf("stats %+v, want 2 registrations and 2 accepted heartbeats", s)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.reg.Instance("ORDERS", id); ok {
		t.Fatal("instance still registered after Close")
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got := c.Stats().Cancels; got != 1 {
		t.Errorf("cancels = %d, want 1", got)
	}
	// No heartbeat after Close.
	before := n.reg.Stats().Renewals
	clk.Advance(time.Hour)
	if got := n.reg.Stats().Renewals; got != before {
		t.Errorf("renewals after Close: %d, want %d", got, before)
	}
}

// TestRegistration_statusAndOverride changes the instance's own status,
// sets an override, removes it, and checks that the registration
// re-registers with its own status after the removal.
func TestRegistration_statusAndOverride(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	c, clk := newClient(t, servers(n.url))
	ctx := ctxT(t)
	r, err := c.Register(ctx, testInstance("billing", 1))
	if err != nil {
		t.Fatal(err)
	}
	id := r.Instance().ID
	status := func() registry.Status { iv, _ := n.reg.Instance("BILLING", id); return iv.Status }

	if err := r.SetStatus(ctx, client.StatusDown); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != registry.StatusDown {
		t.Fatalf("status after SetStatus(DOWN) = %s", got)
	}
	if err := r.SetStatus(ctx, client.StatusUp); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatusOverride(ctx, "BILLING", id, client.StatusOutOfService); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != registry.StatusOutOfService {
		t.Fatalf("status after override = %s", got)
	}
	// The override wins over heartbeats.
	clk.BlockUntil(t, 1)
	clk.Advance(30 * time.Second)
	testwait.True(t, waitTimeout, "heartbeat", func() bool { return n.reg.Stats().Renewals == 1 })
	if got := status(); got != registry.StatusOutOfService {
		t.Fatalf("status after a heartbeat = %s, want the override", got)
	}

	// Removing it without a value leaves UNKNOWN; the next heartbeat is
	// answered 404 and the registration re-registers as UP.
	if err := c.DeleteStatusOverride(ctx, "BILLING", id, ""); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != registry.StatusUnknown {
		t.Fatalf("status after removing the override = %s, want UNKNOWN", got)
	}
	clk.BlockUntil(t, 1)
	clk.Advance(30 * time.Second)
	testwait.True(t, waitTimeout, "re-registration as UP", func() bool { return status() == registry.StatusUp })

	err = c.SetStatusOverride(ctx, "BILLING", "nobody", client.StatusDown)
	if !errors.Is(err, client.ErrNotRegistered) {
		t.Fatalf("override of an unknown instance: %v, want ErrNotRegistered", err)
	}
	if err := c.DeleteStatusOverride(ctx, "BILLING", id, client.StatusUp); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatusOverride(ctx, "BILLING", id, "SLEEPY"); err == nil {
		t.Fatal("invalid status accepted")
	}
}

// TestClient_Register_validation refuses what a server would refuse.
func TestClient_Register_validation(t *testing.T) {
	n := startNode(t)
	c, _ := newClient(t, servers(n.url))
	for _, in := range []client.Instance{
		{HostName: "h", IPAddr: "1.2.3.4"},
		{App: "a", IPAddr: "1.2.3.4"},
		{App: "a", HostName: "h"},
		{App: "a", HostName: "h", IPAddr: "1.2.3.4", Status: "SLEEPY"},
	} {
		if _, err := c.Register(ctxT(t), in); err == nil {
			t.Errorf("Register(%+v) succeeded", in)
		}
	}
	if n.reg.Len() != 0 {
		t.Fatalf("registry holds %d instances, want 0", n.reg.Len())
	}
}

// TestClient_Fetch_delta fetches the whole registry once, then deltas,
// and falls back to a full fetch when the delta's hashcode does not match.
func TestClient_Fetch_delta(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	c, _ := newClient(t, servers(n.url))
	ctx := ctxT(t)
	for i := range 3 {
		if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", fmt.Sprint("orders-", i)))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("BILLING", fmt.Sprint("billing-", 0)))); err != nil {
		t.Fatal(err)
	}
	apps, err := c.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(apps["ORDERS"]) != 3 || len(apps["BILLING"]) != 1 {
		t.Fatalf("first fetch: %d ORDERS, %d BILLING; want 3 and 1", len(apps["ORDERS"]), len(apps["BILLING"]))
	}
	if s := c.Stats(); s.FullFetches != 1 || s.DeltaFetches != 0 {
		t.Fatalf("after the first fetch: %+v", s)
	}

	// A change: the next fetch is a delta.
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", fmt.Sprint("orders-", 3)))); err != nil {
		t.Fatal(err)
	}
	if _, err := n.reg.Apply(registry.StatusOp("BILLING", "billing-0", registry.StatusDown)); err != nil {
		t.Fatal(err)
	}
	apps, err = c.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(apps["ORDERS"]) != 4 || apps["BILLING"][0].Status != client.StatusDown {
		t.Fatalf("after a delta: %d ORDERS, BILLING %v", len(apps["ORDERS"]), apps["BILLING"])
	}
	if s := c.Stats(); s.FullFetches != 1 || s.DeltaFetches != 1 || s.ReconcileFetches != 0 {
		t.Fatalf("after the delta: %+v", s)
	}

	// A cancel that falls out of the delta window before the client looks:
	// the delta no longer shows it, the hashcodes differ, and the client
	// fetches everything again.
	if _, err := n.reg.Apply(registry.CancelOp("ORDERS", "orders-0")); err != nil {
		t.Fatal(err)
	}
	n.clock.Advance(4 * time.Minute)
	n.reg.PruneDeltas()
	apps, err = c.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(apps["ORDERS"]) != 3 {
		t.Fatalf("after reconciling: %d ORDERS, want 3", len(apps["ORDERS"]))
	}
	if s := c.Stats(); s.FullFetches != 2 || s.DeltaFetches != 2 || s.ReconcileFetches != 1 {
		t.Fatalf("after reconciling: %+v, want 2 full, 2 delta, 1 reconcile", s)
	}
	for i, in := range apps["ORDERS"][1:] {
		if in.ID <= apps["ORDERS"][i].ID {
			t.Fatalf("instances not sorted by id: %v", apps["ORDERS"])
		}
	}
}

// TestClient_Register_retriesUntilAServerAccepts: Register waits with
// backoff while no server takes the registration, and gives up at once on
// a 400.
func TestClient_Register_retriesUntilAServerAccepts(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	f := &flaky{h: n.http.Config.Handler}
	f.down.Store(true)
	ts := httptest.NewServer(f)
	t.Cleanup(ts.Close)
	c, clk := newClient(t, servers(ts.URL+"/eureka/"))
	done := make(chan error, 1)
	go func() {
		_, err := c.Register(ctxT(t), testInstance("orders", 0))
		done <- err
	}()
	clk.BlockUntil(t, 1)
	clk.Advance(time.Second)
	clk.BlockUntil(t, 1) // second failure: 2 s
	f.down.Store(false)
	clk.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.hits.Load() != 3 || n.reg.Len() != 1 {
		t.Fatalf("%d attempts, %d registered; want 3 and 1", f.hits.Load(), n.reg.Len())
	}

	// Client.Close cancels what is still registered; later calls fail.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n.reg.Len() != 0 {
		t.Fatal("Client.Close left the instance registered")
	}
	if _, err := c.Register(ctxT(t), testInstance("orders", 1)); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Register after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Watch(ctxT(t), "orders"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}

	// A server that refuses the instance: no retry.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "missing dataCenterInfo", http.StatusBadRequest)
	}))
	t.Cleanup(bad.Close)
	c2, _ := newClient(t, servers(bad.URL+"/eureka/"))
	var se *client.StatusError
	if _, err := c2.Register(ctxT(t), testInstance("orders", 0)); !errors.As(err, &se) || se.Code != 400 {
		t.Fatalf("Register refused with 400: %v", err)
	}
}

// TestClient_oneShotRequests drives RegisterOnce, Heartbeat and Cancel
// directly, as a caller with its own schedule does.
func TestClient_oneShotRequests(t *testing.T) {
	checkGoroutines(t)
	n := startNode(t)
	c, clk := newClient(t, servers(n.url))
	ctx := ctxT(t)
	in := testInstance("orders", 0)
	in.ID = "orders-0"
	dirty := clk.Now()
	if err := c.RegisterOnce(ctx, in, dirty); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, "ORDERS", "orders-0", client.StatusUp, dirty); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(ctx, "ORDERS", "orders-0", "", time.Time{}); err != nil {
		t.Fatalf("heartbeat without lastDirtyTimestamp: %v", err)
	}
	// Newer data than the server holds: register again.
	if err := c.Heartbeat(ctx, "ORDERS", "orders-0", client.StatusUp, dirty.Add(time.Second)); !errors.Is(err, client.ErrNotRegistered) {
		t.Fatalf("heartbeat with a newer lastDirtyTimestamp: %v, want ErrNotRegistered", err)
	}
	if err := c.Heartbeat(ctx, "ORDERS", "ghost", client.StatusUp, dirty); !errors.Is(err, client.ErrNotRegistered) {
		t.Fatalf("heartbeat of an unknown instance: %v, want ErrNotRegistered", err)
	}
	if n.reg.Stats().Renewals < 2 {
		t.Fatalf("renewals = %d", n.reg.Stats().Renewals)
	}
	if err := c.Cancel(ctx, "ORDERS", "orders-0"); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, "ORDERS", "orders-0"); !errors.Is(err, client.ErrNotRegistered) {
		t.Fatalf("second cancel: %v, want ErrNotRegistered", err)
	}
	if n.reg.Len() != 0 {
		t.Fatal("still registered")
	}
}

// TestClient_Fetch_emptyCopyIsRefilledInFull: while the copy is empty the
// client fetches everything, as DiscoveryClient does, not deltas.
func TestClient_Fetch_emptyCopyIsRefilledInFull(t *testing.T) {
	n := startNode(t)
	c, _ := newClient(t, servers(n.url))
	for range 2 {
		if apps, err := c.Fetch(ctxT(t)); err != nil || len(apps) != 0 {
			t.Fatalf("fetch of an empty registry: %v, %v", apps, err)
		}
	}
	if s := c.Stats(); s.FullFetches != 2 || s.DeltaFetches != 0 {
		t.Fatalf("stats %+v, want 2 full fetches", s)
	}
}
