package regions

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/muster-registry/muster/registry"
)

// BenchmarkFetcher_delta is one fetch interval of a 10,000-instance
// region (100 apps) with 10 instances changed: the delta request, its
// application to the copy, the hashcode check and the new view.
func BenchmarkFetcher_delta(b *testing.B) {
	remote := &fakeRemote{}
	for a := 0; a < 100; a++ {
		app := registry.AppView{Name: fmt.Sprintf("APP%03d", a)}
		for i := 0; i < 100; i++ {
			app.Instances = append(app.Instances, inst(app.Name, fmt.Sprintf("i-%03d-%03d", a, i), registry.StatusUp, map[string]string{"zone": "z1"}))
		}
		remote.apps = append(remote.apps, app)
	}
	srv := httptest.NewServer(remote)
	defer srv.Close()
	_, f := newTestSet(b, srv.URL, nil)
	if err := f.FetchOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		st := registry.StatusDown
		if n%2 == 1 {
			st = registry.StatusUp
		}
		remote.mu.Lock()
		var changed []registry.InstanceView
		for i := 0; i < 10; i++ {
			iv := inst("APP007", fmt.Sprintf("i-007-%03d", i), st, map[string]string{"zone": "z1"})
			remote.apps[7].Instances[i] = iv
			d := iv
			d.Instance.ActionType = registry.ActionModified
			changed = append(changed, d)
		}
		remote.delta = []registry.AppView{{Name: "APP007", Instances: changed}}
		remote.mu.Unlock()
		b.StartTimer()
		if err := f.FetchOnce(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if f.Stats().Mismatches != 0 {
		b.Fatalf("mismatches %d", f.Stats().Mismatches)
	}
}
