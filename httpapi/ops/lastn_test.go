package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// drain moves what the registry's change stream holds into the recorder,
// as Run does, without a goroutine.
func drain(t *testing.T, cur *registry.Cursor, l *ops.LastNRecorder) {
	t.Helper()
	for {
		events, resync := cur.Read(make([]registry.Event, 0, 64))
		if resync {
			t.Fatal("resync")
		}
		if len(events) == 0 {
			return
		}
		l.Record(events)
	}
}

func TestLastN_registersCancelsAndEvictions(t *testing.T) {
	n := newActuatorNode(t, func(r *registry.Config, _ *httpapi.Config) { r.SelfPreservation = false })
	l := ops.NewLastNRecorder(n.reg, 3)
	cur := n.reg.Subscribe()
	defer cur.Close()
	t0 := n.clock.Now()
	for i := 1; i <= 5; i++ {
		n.register(t, "billing", fmt.Sprintf("b%d", i))
		n.clock.Advance(time.Second)
	}
	if _, err := n.reg.Apply(registry.Op{Kind: registry.OpRenew, App: "BILLING", ID: "b5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.reg.Apply(registry.Op{Kind: registry.OpCancel, App: "BILLING", ID: "b5"}); err != nil {
		t.Fatal(err)
	}
	drain(t, cur, l)
	v := l.View()
	if v.Size != 3 || len(v.Registered) != 3 || len(v.Cancelled) != 1 {
		t.Fatalf("view %+v", v)
	}
	// Newest first, the oldest two overwritten, with the registry's times.
	for i, want := range []string{"b5", "b4", "b3"} {
		e := v.Registered[i]
		if e.ID != want || e.App != "BILLING" || !e.At.Equal(t0.Add(time.Duration(4-i)*time.Second)) || e.Origin != "client" {
			t.Errorf("registered[%d] = %+v, want %s", i, e, want)
		}
	}
	if c := v.Cancelled[0]; c.ID != "b5" || c.Evicted || c.Origin != "client" {
		t.Errorf("cancel %+v", c)
	}

	// Expired leases are evicted: Eureka lists them among the cancels.
	n.clock.Advance(time.Hour)
	if evicted := n.reg.EvictExpired(); len(evicted) == 0 {
		t.Fatal("nothing evicted")
	}
	drain(t, cur, l)
	v = l.View()
	if len(v.Cancelled) != 3 || !v.Cancelled[0].Evicted || v.Cancelled[0].Origin != "node" {
		t.Fatalf("cancels after eviction %+v", v.Cancelled)
	}
}

// /lastn through the real server, fed by Run on the real change stream.
func TestLastN_HTTP(t *testing.T) {
	n := newActuatorNode(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.srv.LastN().Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// Run subscribes when it starts: register until the first shows.
	var v ops.LastNView
	testwait.For(t, 5*time.Second, "a registration in /lastn", func() error {
		n.register(t, "orders", "o1")
		r := actuatorGet(t, n.http.URL, "/lastn?format=json", "")
		if r.code != 200 {
			return fmt.Errorf("%d %s", r.code, r.body)
		}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			return err
		}
		if len(v.Registered) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	if _, err := n.reg.Apply(registry.Op{Kind: registry.OpRegister, Instance: registrytest.NewInstance("orders", "<o2>")}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.reg.Apply(registry.Op{Kind: registry.OpCancel, App: "ORDERS", ID: "<o2>"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the cancel in /lastn", func() error {
		r := actuatorGet(t, n.http.URL, "/lastn", "", "Accept", "application/json")
		if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			return fmt.Errorf("content type %q", r.header.Get("Content-Type"))
		}
		v = ops.LastNView{}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			return err
		}
		if len(v.Cancelled) != 1 {
			return fmt.Errorf("cancels %+v", v.Cancelled)
		}
		return nil
	})
	if v.Size != ops.LastNSize || v.Registered[0].ID != "<o2>" || v.Cancelled[0].ID != "<o2>" || v.Cancelled[0].At.IsZero() {
		t.Errorf("view %+v", v)
	}
	page := actuatorGet(t, n.http.URL, "/lastn", "", "Accept", "text/html,application/xhtml+xml,application/json;q=0.9,*/*;q=0.8")
	if page.code != 200 || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page.body, "Last 1000 cancelled leases") || !strings.Contains(page.body, "ORDERS(&lt;o2&gt;)") {
		t.Errorf("page %d %q %s", page.code, page.header.Get("Content-Type"), page.body)
	}
	if r := actuatorGet(t, n.http.URL, "/lastn?format=xml", ""); r.code != 400 {
		t.Errorf("format=xml %d", r.code)
	}
	if r := actuatorGet(t, n.http.URL, "/", ""); !strings.Contains(r.body, `href="/lastn"`) {
		t.Errorf("console does not link /lastn")
	}
}
