package simclient

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/tlsconfig"
)

// TestFleet_TLSAndCredentials: a fleet talks to an https node that needs a
// client certificate and HTTP Basic credentials, taken from the server
// URL as Spring's client does; the password never shows in logs or stats.
func TestFleet_TLSAndCredentials(t *testing.T) {
	caCert, caKey, err := tlsconfig.NewCA(tlsconfig.CAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string) tls.Certificate {
		c, k, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: name, IPs: []net.IP{net.ParseIP("127.0.0.1")}, CACert: caCert, CAKey: caKey})
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caCert)

	node := newMusterNode(t)
	api := strings.TrimSuffix(node.url, "/eureka/")
	proxyTarget := api
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "fleet" || p != "s3cret-pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="muster"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, proxyTarget+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{issue("server")}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	ts.StartTLS()
	t.Cleanup(ts.Close)

	var logs testlog.Buffer
	secured := "https://fleet:s3cret-pw@" + strings.TrimPrefix(ts.URL, "https://") + "/eureka/"
	// The first server is down, so the fleet fails over (and logs both).
	down := strings.Replace(closedServer(t), "http://", "https://fleet:s3cret-pw@", 1)
	f := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: down}, {Zone: "a", URL: secured}}, func(c *Config) {
		c.Instances, c.Apps = 4, 1
		c.RenewalInterval = 200 * time.Millisecond
		c.FetchInterval = 200 * time.Millisecond
		c.TLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{issue("client")}}
		c.Logger = zerolog.New(&logs)
	}))
	stop := runFleet(t, f)
	testwait.True(t, 5*time.Second, "registrations and renewals over TLS with credentials", func() bool {
		s := f.Stats()
		return s.Registrations == 4 && s.RenewalsOK >= 4 && s.LastViewInstances == 4
	})
	stop()
	if n := node.reg.Len(); n != 0 {
		t.Errorf("registry holds %d after the fleet cancelled", n)
	}
	if strings.Contains(logs.String(), "s3cret-pw") || strings.Contains(f.Stats().CurrentServer, "s3cret-pw") {
		t.Errorf("the password shows: stats %q, logs:\n%s", f.Stats().CurrentServer, logs.String())
	}
	if f.Stats().Failovers == 0 {
		t.Errorf("no failover from the server that is down: %+v", f.Stats())
	}

	// Without the client certificate nothing gets through.
	g := mustNewFleet(t, testConfig(t, []Server{{Zone: "a", URL: secured}}, func(c *Config) {
		c.Instances, c.Apps = 1, 1
		c.TLS = &tls.Config{RootCAs: pool}
	}))
	stopG := runFleet(t, g)
	testwait.True(t, 5*time.Second, "a failed registration", func() bool { return g.Stats().RegistrationFailures > 0 })
	stopG()
	if g.Stats().Registrations != 0 {
		t.Errorf("registered without a client certificate: %+v", g.Stats())
	}
}
