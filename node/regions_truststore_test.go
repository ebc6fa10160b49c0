package node

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/muster-registry/muster/internal/keystoretest"
	"github.com/muster-registry/muster/regions/regionstest"
	"github.com/muster-registry/muster/registry/registrytest"
)

// TestRegions_trustStoreJavaKeystores: region a fetches an HTTPS region b
// (served with the keystore set's node.p12, a certificate of the set's
// CA) verifying it against eureka.server.remote-region-trust-store given
// as a PKCS12 or JKS trust store (keytool-made), by path, file: or
// classpath:, with its password; the PEM bundle still works. Without the
// trust store the handshake fails (the CA is not a system root), and a
// wrong password stops the node at start with an error that names the
// setting and not the password.
func TestRegions_trustStoreJavaKeystores(t *testing.T) {
	for name, set := range keystoretest.Sets(t) {
		t.Run(name, func(t *testing.T) {
			clock := registrytest.NewClock()
			pb := freeTCPPort(t)
			b := regionNode(t, "b", pb, clock, nil,
				"server.ssl.key-store="+set.Path("node.p12"),
				"server.ssl.key-store-password="+keystoretest.StorePassword,
				"server.ssl.key-alias=node")
			c := tlsClient(t, set.Path("ca.pem"), "", "")
			code, body, err := do(t, c, "POST", "https://"+b.Addr()+"/eureka/apps/ORDERS", instanceBody("ORDERS", "o1", 3600))
			if err != nil || code != http.StatusNoContent {
				t.Fatalf("register on https region b: %d %s %v", code, body, err)
			}
			bURL := "https://127.0.0.1:" + strconv.Itoa(pb) + "/eureka/"

			classpath := t.TempDir()
			copyInto(t, set.Path("trust.jks"), filepath.Join(classpath, "remote-trust.jks"))
			for _, tc := range []struct{ what, store, password string }{
				{"PKCS12 by path", set.Path("trust.p12"), keystoretest.TrustPassword},
				{"JKS as file:", "file:" + set.Path("trust.jks"), keystoretest.TrustPassword},
				{"JKS as classpath:", "classpath:remote-trust.jks", keystoretest.TrustPassword},
				{"PEM bundle", set.Path("ca.pem"), ""},
			} {
				a := regionNode(t, "a", freeTCPPort(t), registrytest.NewClock(), map[string]string{"b": bURL},
					"muster.classpath="+classpath,
					"eureka.server.remote-region-trust-store="+tc.store,
					"eureka.server.remote-region-trust-store-password="+tc.password)
				waitFor(t, 20*time.Second, tc.what+": region a fetched https region b", func() bool {
					return a.regions.Fetchers()[0].View().HasData
				})
				doc, _ := regionstest.FetchDoc(t, "http://"+a.Addr()+"/eureka/apps?regions=b", false, nil)
				if ids := regionstest.CopyOf(doc).IDs(); strings.Join(ids, ",") != "ORDERS/o1=UP@b" {
					t.Errorf("%s: region a serves %v of b, want ORDERS/o1", tc.what, ids)
				}
				_ = a.Shutdown(context.Background())
			}

			// Without the trust store: the system roots, which do not hold
			// the set's CA.
			a := regionNode(t, "a", freeTCPPort(t), registrytest.NewClock(), map[string]string{"b": bURL})
			waitFor(t, 20*time.Second, "region a's fetch of b without the trust store fails", func() bool {
				return a.regions.Fetchers()[0].Stats().Errors > 0
			})
			if st := a.regions.Fetchers()[0].Stats(); !strings.Contains(st.LastError, "certificate") || a.regions.Fetchers()[0].View().HasData {
				t.Errorf("without the trust store: %+v", st)
			}

			// A wrong password: the node does not start, and says why.
			const wrong = "hunter2-wrong"
			s := mustLoad(t, "", nil, []string{"server.port=0", "server.address=127.0.0.1", "cluster.enabled=false",
				"eureka.server.remote-region-urls-with-name.b=" + bURL,
				"eureka.server.remote-region-trust-store=" + set.Path("trust.p12"),
				"eureka.server.remote-region-trust-store-password=" + wrong})
			_, err = New(s, testLogger(t), Options{Memberlist: memberlist.DefaultLocalConfig()})
			if err == nil || !strings.Contains(err.Error(), "eureka.server.remote-region-trust-store") ||
				!strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), wrong) {
				t.Errorf("a wrong trust store password: %v", err)
			}
		})
	}
}
