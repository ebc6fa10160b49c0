package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/tlsconfig"
)

func TestLoad_badFilesNameTheFile(t *testing.T) {
	ca := mustCA(t, "CA")
	good := mustFiles(t, ca, "node")
	other := mustFiles(t, ca, "other")
	junk := filepath.Join(t.TempDir(), "junk.pem")
	mustWrite(t, junk, []byte("not a PEM file"))
	missing := filepath.Join(t.TempDir(), "missing.pem")

	for _, tc := range []struct {
		name string
		cfg  tlsconfig.Config
		want tlsconfig.File
		text string
	}{
		{"no certificate", tlsconfig.Config{KeyFile: good.key}, tlsconfig.FileCertificate, "not set"},
		{"no key", tlsconfig.Config{CertFile: good.cert}, tlsconfig.FileKey, "not set"},
		{"need without trust", tlsconfig.Config{CertFile: good.cert, KeyFile: good.key, ClientAuth: tlsconfig.ClientAuthNeed}, tlsconfig.FileTrust, "not set"},
		{"certificate missing", tlsconfig.Config{CertFile: missing, KeyFile: good.key}, tlsconfig.FileCertificate, "no such file"},
		{"key missing", tlsconfig.Config{CertFile: good.cert, KeyFile: missing}, tlsconfig.FileKey, "no such file"},
		{"trust missing", tlsconfig.Config{CertFile: good.cert, KeyFile: good.key, TrustFile: missing}, tlsconfig.FileTrust, "no such file"},
		{"certificate not PEM", tlsconfig.Config{CertFile: junk, KeyFile: good.key}, tlsconfig.FileCertificate, "no PEM CERTIFICATE"},
		{"key not PEM", tlsconfig.Config{CertFile: good.cert, KeyFile: junk}, tlsconfig.FileKey, "no PEM PRIVATE KEY"},
		{"key of another certificate", tlsconfig.Config{CertFile: good.cert, KeyFile: other.key}, tlsconfig.FileKey, "does not load with certificate"},
		{"trust not PEM", tlsconfig.Config{CertFile: good.cert, KeyFile: good.key, TrustFile: junk}, tlsconfig.FileTrust, "no PEM CERTIFICATE"},
		{"certificate as trust bundle is fine, key as trust is not", tlsconfig.Config{CertFile: good.cert, KeyFile: good.key, TrustFile: good.key}, tlsconfig.FileTrust, "no PEM CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tlsconfig.Load(tc.cfg)
			var fe *tlsconfig.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if fe.File != tc.want || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("err = %v (file %s), want file %s and %q", err, fe.File, tc.want, tc.text)
			}
		})
	}
	if _, err := tlsconfig.Load(tlsconfig.Config{CertFile: "file:" + good.cert, KeyFile: good.key, TrustFile: good.trust}); err != nil {
		t.Errorf("Spring's file: prefix: %v", err)
	}
}

func TestStore_Check(t *testing.T) {
	ca, other := mustCA(t, "CA"), mustCA(t, "Other")
	f := mustFiles(t, ca, "node")
	s := mustLoad(t, f, tlsconfig.ClientAuthNone)
	if w := s.Check(time.Now()); len(w) != 0 {
		t.Errorf("Check = %q, want nothing", w)
	}
	if w := s.Check(time.Now().Add(400 * 24 * time.Hour)); len(w) == 0 || !strings.Contains(w[0], "expired") {
		t.Errorf("Check a year later = %q, want expired", w)
	}
	mustWrite(t, f.trust, other.cert)
	s = mustLoad(t, f, tlsconfig.ClientAuthNone)
	if w := s.Check(time.Now()); len(w) != 1 || !strings.Contains(w[0], "does not verify against trust certificate") {
		t.Errorf("Check with another CA as trust = %q", w)
	}
}

// serve starts an HTTPS server on loopback with the store's ServerConfig;
// handlers answer the client certificate's common name.
func serve(t *testing.T, s *tlsconfig.Store) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := "-"
		if len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		io.WriteString(w, cn)
	}))
	srv.TLS = s.ServerConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// client dials with the store's DialTLSContext, as peers do.
func client(s *tlsconfig.Store) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialTLSContext: s.DialTLSContext(&net.Dialer{Timeout: time.Second})}}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestServerConfig_clientAuth(t *testing.T) {
	ca, other := mustCA(t, "CA"), mustCA(t, "Other")
	server := mustFiles(t, ca, "server")
	peer := mustLoad(t, mustFiles(t, ca, "peer"), tlsconfig.ClientAuthNone)
	// A client whose certificate comes from another CA but which trusts
	// the server's CA: only its own certificate is wrong.
	strangerFiles := mustFiles(t, other, "stranger")
	mustWrite(t, strangerFiles.trust, ca.cert)
	stranger := mustLoad(t, strangerFiles, tlsconfig.ClientAuthNone)
	anonymous := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: peer.ClientConfig("").RootCAs}}}

	for _, tc := range []struct {
		auth                          tlsconfig.ClientAuth
		peerCN, strangerOK, anonymous string // "" = refused
	}{
		{tlsconfig.ClientAuthNone, "-", "-", "-"},
		{tlsconfig.ClientAuthWant, "peer", "", "-"},
		{tlsconfig.ClientAuthNeed, "peer", "", ""},
	} {
		t.Run(tc.auth.String(), func(t *testing.T) {
			url := serve(t, mustLoad(t, server, tc.auth))
			for _, c := range []struct {
				who    string
				client *http.Client
				want   string
			}{{"peer", client(peer), tc.peerCN}, {"stranger", client(stranger), tc.strangerOK}, {"anonymous", anonymous, tc.anonymous}} {
				got, err := get(c.client, url)
				switch {
				case c.want == "" && err == nil:
					t.Errorf("%s: answered %q, want the handshake refused", c.who, got)
				case c.want != "" && err != nil:
					t.Errorf("%s: %v, want %q", c.who, err, c.want)
				case c.want != "" && got != c.want:
					t.Errorf("%s: server saw client %q, want %q", c.who, got, c.want)
				}
			}
		})
	}
}

func TestDialTLSContext_verifiesTheServer(t *testing.T) {
	ca, other := mustCA(t, "CA"), mustCA(t, "Other")
	url := serve(t, mustLoad(t, mustFiles(t, other, "impostor"), tlsconfig.ClientAuthNone))
	peer := mustLoad(t, mustFiles(t, ca, "peer"), tlsconfig.ClientAuthNone)
	if _, err := get(client(peer), url); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("err = %v, want the impostor's certificate refused", err)
	}
	// The certificate is for 127.0.0.1 and localhost, not for other names.
	good := serve(t, mustLoad(t, mustFiles(t, ca, "server"), tlsconfig.ClientAuthNone))
	dial := peer.DialTLSContext(&net.Dialer{})
	host := strings.TrimPrefix(good, "https://")
	if _, err := dial(context.Background(), "tcp", strings.Replace(host, "127.0.0.1", "localhost", 1)); err != nil {
		t.Errorf("dial localhost: %v", err)
	}
	c := tls.Client(mustDial(t, host), peer.ClientConfig("node-z"))
	if err := c.Handshake(); err == nil || !strings.Contains(err.Error(), "node-z") {
		t.Errorf("handshake for node-z: %v, want a name mismatch", err)
	}
	c.Close()
}

func mustDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStore_Reload_rotation rotates the server's certificate on disk: a
// connection kept alive across the rotation goes on working with the old
// certificate, new connections see the new one, and a bad pair written
// later changes nothing.
func TestStore_Reload_rotation(t *testing.T) {
	ca := mustCA(t, "CA")
	f := mustFiles(t, ca, "server")
	var logs strings.Builder
	srvStore, err := tlsconfig.Load(tlsconfig.Config{CertFile: f.cert, KeyFile: f.key, TrustFile: f.trust,
		ClientAuth: tlsconfig.ClientAuthNeed, Logger: zerolog.New(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, srvStore)
	peer := mustLoad(t, mustFiles(t, ca, "peer"), tlsconfig.ClientAuthNone)
	keepAlive := client(peer)

	serial := func(c *http.Client) (string, bool) {
		t.Helper()
		reused := false
		req, _ := http.NewRequest("GET", url, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].SerialNumber.String(), reused
	}
	before, _ := serial(keepAlive)
	if changed, err := srvStore.Reload(); changed || err != nil {
		t.Fatalf("Reload without changes = %v, %v", changed, err)
	}

	cert, key := ca.issue(t, "server")
	mustWrite(t, f.cert, cert)
	mustWrite(t, f.key, key)
	if changed, err := srvStore.Reload(); !changed || err != nil {
		t.Fatalf("Reload after rotation = %v, %v", changed, err)
	}
	old, reused := serial(keepAlive)
	if !reused || old != before {
		t.Errorf("kept-alive connection: reused %v, serial %s, want the same connection with the old serial %s", reused, old, before)
	}
	fresh, reused := serial(client(peer))
	if reused || fresh == before {
		t.Errorf("new connection: reused %v, serial %s, want a new handshake with a new certificate", reused, fresh)
	}
	if !strings.Contains(logs.String(), "TLS certificate reloaded") {
		t.Errorf("log = %s, want the reload logged", logs.String())
	}

	// A key that does not match: the rotated certificate stays.
	_, wrongKey := ca.issue(t, "server")
	mustWrite(t, f.key, wrongKey)
	logs.Reset()
	if changed, err := srvStore.Reload(); changed || err == nil {
		t.Fatalf("Reload with a mismatched key = %v, %v, want an error", changed, err)
	}
	if _, err := srvStore.Reload(); err == nil {
		t.Error("second Reload of the same bad files reported no error")
	}
	if n := strings.Count(logs.String(), "new TLS files refused"); n != 1 {
		t.Errorf("refusal logged %d times, want once: %s", n, logs.String())
	}
	if got, _ := serial(client(peer)); got != fresh {
		t.Errorf("after a bad pair: serial %s, want %s still", got, fresh)
	}
	os.Remove(f.cert)
	if _, err := srvStore.Reload(); err == nil {
		t.Error("Reload with the certificate gone reported no error")
	}
	if got, _ := serial(client(peer)); got != fresh {
		t.Errorf("after the file vanished: serial %s, want %s still", got, fresh)
	}
}

// TestStore_Reload_trustBundle adds a second CA to the bundle while
// running: a client of the new CA is refused before and accepted after.
func TestStore_Reload_trustBundle(t *testing.T) {
	ca, next := mustCA(t, "CA"), mustCA(t, "Next CA")
	f := mustFiles(t, ca, "server")
	s := mustLoad(t, f, tlsconfig.ClientAuthNeed)
	url := serve(t, s)
	nf := mustFiles(t, next, "new-peer")
	mustWrite(t, nf.trust, append(append([]byte{}, ca.cert...), next.cert...))
	newPeer := mustLoad(t, nf, tlsconfig.ClientAuthNone)
	if _, err := get(client(newPeer), url); err == nil {
		t.Fatal("a peer of the next CA was accepted before the bundle listed it")
	}
	mustWrite(t, f.trust, append(append([]byte{}, ca.cert...), next.cert...))
	if _, err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, err := get(client(newPeer), url); err != nil || got != "new-peer" {
		t.Errorf("after the bundle reload: %q, %v; want new-peer accepted", got, err)
	}
}

func TestParseClientAuth(t *testing.T) {
	for in, want := range map[string]tlsconfig.ClientAuth{"": tlsconfig.ClientAuthNone, "NONE": tlsconfig.ClientAuthNone, "want": tlsconfig.ClientAuthWant, "Need": tlsconfig.ClientAuthNeed} {
		if got, err := tlsconfig.ParseClientAuth(in); err != nil || got != want {
			t.Errorf("ParseClientAuth(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := tlsconfig.ParseClientAuth("required"); err == nil {
		t.Error("ParseClientAuth(required) accepted")
	}
}
