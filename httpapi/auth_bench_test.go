package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// BenchmarkServer_heartbeatAuth is BenchmarkServer_heartbeat with HTTP
// Basic authentication on and a bcrypt password (default cost): after the
// first request the password is recognised from the authenticator's cache,
// so the difference to the open heartbeat is what authentication costs per
// request.
func BenchmarkServer_heartbeatAuth(b *testing.B) {
	const n = 10_000
	rcfg := registry.DefaultConfig()
	rcfg.Logger = zerolog.Nop()
	reg, err := registry.New(rcfg)
	if err != nil {
		b.Fatal(err)
	}
	reg.OpenForTraffic()
	for i := range n {
		if _, err := reg.Apply(registry.RegisterOp(registrytest.NewInstance(fmt.Sprintf("APP-%d", i/50), fmt.Sprintf("i-%d", i)))); err != nil {
			b.Fatal(err)
		}
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("svc-pw"), bcrypt.DefaultCost)
	u, err := auth.NewUser("svc", "{bcrypt}"+string(hash), auth.RoleWrite, nil)
	if err != nil {
		b.Fatal(err)
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.Registry = reg
	hcfg.Logger = zerolog.Nop()
	if hcfg.Auth, err = auth.NewAuthenticator(u); err != nil {
		b.Fatal(err)
	}
	srv, err := httpapi.New(hcfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodPut,
			fmt.Sprintf("/eureka/apps/APP-%d/i-%d?status=UP&lastDirtyTimestamp=1718000000000", i/50, i), nil)
		reqs[i].Header.Set("Accept", "application/json")
		reqs[i].SetBasicAuth("svc", "svc-pw")
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, reqs[i%n])
		if w.Code != http.StatusOK {
			b.Fatalf("heartbeat: %d %s", w.Code, w.Body)
		}
	}
}
