package spring

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/interop/interoptest"
)

// TestClients runs every client through every scenario, each scenario with
// its own node(s) and its own JVM.
func TestClients(t *testing.T) {
	for _, c := range clients {
		c := c
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			interoptest.Built(t, interoptest.Source(t, c.src)) // skips here, once, before any node starts
			for _, s := range []struct {
				name       string
				run        func(*testing.T, client)
				driverOnly bool // eureka-client's own settings, which Spring does not expose
			}{
				{"lifecycle", lifecycle, false},
				{"failover", failover, false},
				{"basic-auth", basicAuth, false},
				{"tls", tlsScenario, false},
				{"codecs", codecs, true},
				{"compact", compact, true},
			} {
				s := s
				if s.driverOnly && c.main == "" {
					continue
				}
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					takeJVMSlot(t)
					s.run(t, c)
				})
			}
		})
	}
}

// evictingNode is a node that evicts a lease soon after it runs out (the
// apps register with a 3 s lease), self-preservation off.
func evictingNode(t *testing.T, sets ...string) *interoptest.Node {
	return interoptest.NewNode(t, append([]string{"eureka.server.enable-self-preservation=false",
		"eureka.server.eviction-interval-timer-in-ms=500"}, sets...)...)
}

// appPath is the regular expression of a path under the app's Eureka
// resource: rest "" for the app, "/ID" for its instance.
func appPath(a *app, rest string) string {
	return `^/eureka/apps/` + regexp.QuoteMeta(a.App) + rest + `$`
}

var ok200, ok204, got404 = []int{http.StatusOK}, []int{http.StatusNoContent}, []int{http.StatusNotFound}

// lifecycle is one client through a node's working life: registration,
// heartbeats, fetches, its own status, overrides, metadata, the three ways
// a node loses an instance, and shutdown.
func lifecycle(t *testing.T, c client) {
	node := evictingNode(t).Start()
	tap := interoptest.NewWireTap(t, node.Base())
	var a *app
	logWire(t, tap, func() *app { return a })
	a = startApp(t, c, c.name+"-life", []string{tap.URL() + "/eureka/"}, nil)

	// Register, renew, fetch.
	waitOnNode(t, node, tap, 0, a, "registered UP", func(i instance) error {
		if i.Status != "UP" || i.Port.Value != a.Port || i.Metadata["team"] != "interop" {
			return fmt.Errorf("status %s port %d metadata %v; want UP, port %d, team=interop", i.Status, i.Port.Value, i.Metadata, a.Port)
		}
		return nil
	})
	mustSee(t, tap, 0, "POST", appPath(a, ""), ok204, "the registration")
	mustSee(t, tap, 0, "GET", `^/eureka/apps/?$`, ok200, "the first full fetch")
	delta := mustSee(t, tap, 0, "GET", `^/eureka/apps/delta$`, ok200, "a delta fetch after the full one")
	if !strings.Contains(delta.RespType, "json") {
		t.Fatalf("the delta was answered %q, the client asked JSON\n%s", delta.RespType, wire(tap, 0))
	}
	a.waitSees(a.App, a.ID, "itself UP", statusIs("UP"))
	for i := 0; i < 2; i++ {
		mustSee(t, tap, tap.Len(), "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "a heartbeat")
	}

	// From here on every change reaches the client through deltas alone.
	phase := tap.Len()

	// Its own status, as a health check sets it.
	a.setStatus("DOWN")
	waitOnNode(t, node, tap, phase, a, "the client's own DOWN", nodeStatusIs("DOWN"))
	a.waitSees(a.App, a.ID, "itself DOWN", statusIs("DOWN"))
	a.setStatus("UP")
	waitOnNode(t, node, tap, phase, a, "UP again", nodeStatusIs("UP"))
	a.waitSees(a.App, a.ID, "itself UP again", statusIs("UP"))

	// Metadata changed at run time.
	a.setMetadata("zone", "blue")
	waitOnNode(t, node, tap, phase, a, "the new metadata", func(i instance) error {
		if i.Metadata["zone"] != "blue" || i.Metadata["team"] != "interop" {
			return fmt.Errorf("metadata %v", i.Metadata)
		}
		return nil
	})
	a.waitSees(a.App, a.ID, "its new metadata", func(s *seen) error {
		if s.Metadata["zone"] != "blue" {
			return fmt.Errorf("metadata %v", s.Metadata)
		}
		return nil
	})

	// An override from the app itself, the Spring way, and its removal.
	if c.spring {
		mark := tap.Len()
		a.serviceRegistry("OUT_OF_SERVICE")
		mustSee(t, tap, mark, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)+"/status"), ok200, "the override from /actuator/serviceregistry")
		overrideHolds(t, node, tap, mark, a)
		mark = tap.Len()
		a.serviceRegistry("CANCEL_OVERRIDE")
		mustSee(t, tap, mark, "DELETE", appPath(a, "/"+regexp.QuoteMeta(a.ID)+"/status"), ok200, "the override's removal from /actuator/serviceregistry")
		overrideGone(t, node, tap, mark, a)
	}

	// An operator's override through the REST API, and its removal.
	mark := tap.Len()
	if code, b, err := nodeCall(node, http.MethodPut, node.URL()+"apps/"+a.App+"/"+a.ID+"/status?value=OUT_OF_SERVICE"); err != nil || code != http.StatusOK {
		t.Fatalf("operator override: %d %v %s", code, err, b)
	}
	overrideHolds(t, node, tap, mark, a)
	mark = tap.Len()
	if code, b, err := nodeCall(node, http.MethodDelete, node.URL()+"apps/"+a.App+"/"+a.ID+"/status?value=UP"); err != nil || code != http.StatusOK {
		t.Fatalf("operator override removal: %d %v %s", code, err, b)
	}
	overrideGone(t, node, tap, mark, a)

	// Every change above came through deltas that reconciled: no hashcode
	// mismatch, no second full fetch.
	st := a.mustState()
	deltas := count(tap, phase, "GET", `^/eureka/apps/delta$`)
	fulls := count(tap, phase, "GET", `^/eureka/apps/?$`)
	if st.Mismatches != 0 || fulls != 0 || deltas < 5 {
		t.Fatalf("after the changes: %d hashcode mismatches (client counter), %d full fetches and %d deltas on the wire; want 0, 0, 5+\n%s",
			st.Mismatches, fulls, deltas, wire(tap, phase))
	}
	reregistersMatch(t, a, tap)

	// 1. Eviction: the client is cut off until its lease runs out, then
	// heals; the next heartbeat is answered 404 and it registers again.
	before := evictions(t, node)
	tap.SetCut(true)
	waitGoneFromNode(t, node, node.URL(), tap, phase, a, "evicted while cut off")
	if evictions(t, node) <= before {
		t.Fatalf("the instance went away without an eviction")
	}
	mark = tap.Len()
	tap.SetCut(false)
	waitOnNode(t, node, tap, mark, a, "registered again after the eviction", nodeStatusIs("UP"))
	mustSee(t, tap, mark, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), got404, "the heartbeat after the eviction")
	mustSee(t, tap, mark, "POST", appPath(a, ""), ok204, "the re-registration after the eviction")
	a.waitSees(a.App, a.ID, "itself UP after the eviction", statusIs("UP"))

	// 2. A node restarted without a data dir knows nothing: same repair.
	node.Stop()
	mark = tap.Len()
	node.Start()
	waitOnNode(t, node, tap, mark, a, "registered again on the restarted node", nodeStatusIs("UP"))
	mustSee(t, tap, mark, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), got404, "the heartbeat to the restarted node")
	mustSee(t, tap, mark, "POST", appPath(a, ""), ok204, "the re-registration on the restarted node")

	// 3. An operator's cancel: same repair.
	mark = tap.Len()
	if code, b, err := nodeCall(node, http.MethodDelete, node.URL()+"apps/"+a.App+"/"+a.ID); err != nil || code != http.StatusOK {
		t.Fatalf("operator cancel: %d %v %s", code, err, b)
	}
	mustSee(t, tap, mark, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), got404, "the heartbeat after the operator's cancel")
	mustSee(t, tap, mark, "POST", appPath(a, ""), ok204, "the re-registration after the operator's cancel")
	waitOnNode(t, node, tap, mark, a, "registered again after the operator's cancel", nodeStatusIs("UP"))
	a.waitSees(a.App, a.ID, "itself UP after the losses", statusIs("UP"))
	if n := reregistersMatch(t, a, tap); n < 3 {
		t.Fatalf("the client counts %d re-registrations after three losses\n%s", n, wire(tap, phase))
	}

	// Shutdown cancels: gone at once, not after the lease runs out.
	mark = tap.Len()
	a.Stop()
	mustSee(t, tap, mark, "DELETE", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "the cancel at shutdown")
	if _, err := getInstance(node, node.URL(), a.App, a.ID); err == nil || !strings.HasSuffix(err.Error(), ": 404") {
		t.Fatalf("after the client's shutdown the instance is still there: %v\n%s", err, wire(tap, mark))
	}
	noErrors(t, tap, c.name)
}

// reregistersMatch waits until the client's re-registration counter
// equals the heartbeats answered 404 on the wire: the client registers
// again after each one (a lost instance, or one whose lastDirtyTimestamp
// is newer than the node's: a change the client has not sent yet, or an
// override removed, which leaves the node's status UNKNOWN as the Java
// server does), and never otherwise.
func reregistersMatch(t *testing.T, a *app, tap *interoptest.WireTap) int64 {
	t.Helper()
	var last string
	var n int64
	if !poll(15*time.Second, func() error {
		st, err := a.state()
		if err != nil {
			return err
		}
		beats404 := 0
		for _, e := range tap.Find(0, "PUT", "/eureka/apps/"+a.App+"/"+a.ID) {
			if !strings.HasSuffix(e.Path, "/status") && e.Status == http.StatusNotFound {
				beats404++
			}
		}
		n = st.Reregister
		if st.Reregister != int64(beats404) {
			last = fmt.Sprintf("the client counts %d re-registrations, the wire has %d heartbeats answered 404", st.Reregister, beats404)
			return fmt.Errorf("%s", last)
		}
		return nil
	}) {
		t.Fatalf("%s\n%s", last, wire(tap, 0))
	}
	return n
}

// overrideHolds checks an OUT_OF_SERVICE override on the node, that the
// client sees it, and that the client's heartbeats do not undo it.
func overrideHolds(t *testing.T, node *interoptest.Node, tap *interoptest.WireTap, mark int, a *app) {
	t.Helper()
	want := func(i instance) error {
		if i.Status != "OUT_OF_SERVICE" || i.override() != "OUT_OF_SERVICE" {
			return fmt.Errorf("status %s overridden %s, want OUT_OF_SERVICE for both", i.Status, i.override())
		}
		return nil
	}
	waitOnNode(t, node, tap, mark, a, "the override", want)
	a.waitSees(a.App, a.ID, "its override", func(s *seen) error {
		if s.Status != "OUT_OF_SERVICE" || s.Overridden != "OUT_OF_SERVICE" {
			return fmt.Errorf("status %s overridden %s", s.Status, s.Overridden)
		}
		return nil
	})
	beat := tap.Len()
	for i := 0; i < 3; i++ {
		mustSee(t, tap, tap.Len(), "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "a heartbeat during the override")
	}
	if i, err := getInstance(node, node.URL(), a.App, a.ID); err != nil || want(i) != nil {
		t.Fatalf("the client's heartbeats undid the override: %v %v\n%s", err, want(i), wire(tap, beat))
	}
}

// overrideGone checks the override is removed on the node and in the
// client's registry, and the instance is UP again.
func overrideGone(t *testing.T, node *interoptest.Node, tap *interoptest.WireTap, mark int, a *app) {
	t.Helper()
	waitOnNode(t, node, tap, mark, a, "the override removed", func(i instance) error {
		if i.Status != "UP" || (i.override() != "" && i.override() != "UNKNOWN") {
			return fmt.Errorf("status %s overridden %s, want UP and no override", i.Status, i.override())
		}
		return nil
	})
	a.waitSees(a.App, a.ID, "its override removed", func(s *seen) error {
		if s.Status != "UP" || s.Overridden != "UNKNOWN" {
			return fmt.Errorf("status %s overridden %s, want UP and UNKNOWN", s.Status, s.Overridden)
		}
		return nil
	})
}

// failover: two standalone nodes in the client's service URLs; the node in
// use dies, the client moves to the other one (where it is unknown: a 404
// then a registration), and back when that one dies in turn.
func failover(t *testing.T, c client) {
	nodes := []*interoptest.Node{interoptest.NewNode(t).Start(), interoptest.NewNode(t).Start()}
	taps := []*interoptest.WireTap{interoptest.NewWireTap(t, nodes[0].Base()), interoptest.NewWireTap(t, nodes[1].Base())}
	var a *app
	logWire(t, taps[0], func() *app { return a })
	logWire(t, taps[1], func() *app { return a })
	a = startApp(t, c, c.name+"-fail", []string{taps[0].URL() + "/eureka/", taps[1].URL() + "/eureka/"}, nil)
	used := -1
	if !poll(45*time.Second, func() error {
		for i, n := range nodes {
			if _, err := getInstance(n, n.URL(), a.App, a.ID); err == nil {
				used = i
				return nil
			}
		}
		return fmt.Errorf("on neither node")
	}) {
		t.Fatalf("registered with neither service URL\n%s\n%s", wire(taps[0], 0), wire(taps[1], 0))
	}
	for round := 0; round < 2; round++ {
		spare := 1 - used
		mark := taps[spare].Len()
		nodes[used].Stop()
		what := fmt.Sprintf("round %d: moved to the other node", round)
		waitOnNode(t, nodes[spare], taps[spare], mark, a, what, nodeStatusIs("UP"))
		mustSee(t, taps[spare], mark, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), []int{http.StatusOK, http.StatusNotFound}, what+": heartbeats")
		mustSee(t, taps[spare], mark, "GET", `^/eureka/apps/(delta)?/?$`, ok200, what+": fetches")
		a.waitSees(a.App, a.ID, "itself after the failover", statusIs("UP"))
		// The dead node comes back empty; the next round stops the other.
		nodes[used].Start()
		used = spare
	}
	noErrors(t, taps[0], c.name)
	noErrors(t, taps[1], c.name)
}

// basicAuth: a node with authentication on; the client has its
// credentials only as user:pass@ in the service URL.
func basicAuth(t *testing.T, c client) {
	name := c.name + "-auth"
	node := interoptest.NewNode(t, "spring.security.user.name=admin", "spring.security.user.password=admin-pw",
		"muster.auth.users.orders.password={noop}orders-pw", "muster.auth.users.orders.role=write",
		"muster.auth.users.orders.apps="+strings.ToUpper(name)).Start()
	tap := interoptest.NewWireTap(t, node.Base())
	withCreds := "http://orders:orders-pw@" + strings.TrimPrefix(tap.URL(), "http://") + "/eureka/"
	direct := "http://orders:orders-pw@127.0.0.1:" + fmt.Sprint(node.Port) + "/eureka/"
	var a *app
	logWire(t, tap, func() *app { return a })
	a = startApp(t, c, name, []string{withCreds}, nil)
	waitOnNodeURL(t, node, direct, tap, 0, a, "registered with the credentials from the URL", nodeStatusIs("UP"))
	if code, _, _ := nodeCall(node, http.MethodGet, node.URL()+"apps/"+a.App+"/"+a.ID); code != http.StatusUnauthorized {
		t.Fatalf("GET without credentials: %d, want 401 (is auth on?)", code)
	}
	mustSee(t, tap, 0, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "a heartbeat with credentials")
	mustSee(t, tap, 0, "GET", `^/eureka/apps/delta$`, ok200, "a delta fetch with credentials")
	a.waitSees(a.App, a.ID, "itself, fetched with credentials", statusIs("UP"))
	a.setStatus("DOWN")
	waitOnNodeURL(t, node, direct, tap, 0, a, "its own DOWN, sent with its credentials", nodeStatusIs("DOWN"))
	a.setStatus("UP")
	waitOnNodeURL(t, node, direct, tap, 0, a, "UP again", nodeStatusIs("UP"))
	mark := tap.Len()
	a.Stop()
	mustSee(t, tap, mark, "DELETE", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "the cancel at shutdown, with credentials")
	waitGoneFromNode(t, node, direct, tap, mark, a, "cancelled at shutdown")
	noErrors(t, tap, c.name)
}

// tlsScenario: a node serving https with a certificate from its own CA;
// the client trusts that CA through a trust store made with keytool, set
// the way its users set it.
func tlsScenario(t *testing.T, c client) {
	if _, err := exec.LookPath("keytool"); err != nil {
		t.Skip("SKIP: no keytool on PATH to make the Java trust store")
	}
	certs := t.TempDir()
	musterCmd(t, "tls", "ca", "--out-dir", certs)
	musterCmd(t, "tls", "cert", "--out-dir", certs, "--name", "node", "--ip", "127.0.0.1")
	store := filepath.Join(certs, "trust.p12")
	if out, err := exec.Command("keytool", "-importcert", "-noprompt", "-alias", "muster-ca",
		"-file", filepath.Join(certs, "muster-ca.pem"), "-keystore", store, "-storetype", "PKCS12",
		"-storepass", "changeit").CombinedOutput(); err != nil {
		t.Fatalf("keytool: %v\n%s", err, out)
	}
	node := interoptest.NewNode(t)
	cert, key, ca := filepath.Join(certs, "node.pem"), filepath.Join(certs, "node-key.pem"), filepath.Join(certs, "muster-ca.pem")
	node.UseTLS(cert, key, ca)
	node.Start()
	tap := interoptest.NewTLSWireTap(t, node.Base(), cert, key, ca)
	var a *app
	logWire(t, tap, func() *app { return a })
	var jvm, extra []string
	if c.spring {
		storeURL := (&url.URL{Scheme: "file", Path: store}).String()
		extra = []string{"--eureka.client.tls.enabled=true", "--eureka.client.tls.trust-store=" + storeURL,
			"--eureka.client.tls.trust-store-password=changeit", "--eureka.client.tls.trust-store-type=PKCS12"}
	} else {
		jvm = []string{"-Djavax.net.ssl.trustStore=" + store, "-Djavax.net.ssl.trustStorePassword=changeit", "-Djavax.net.ssl.trustStoreType=PKCS12"}
	}
	a = startApp(t, c, c.name+"-tls", []string{tap.URL() + "/eureka/"}, jvm, extra...)
	waitOnNode(t, node, tap, 0, a, "registered over https", nodeStatusIs("UP"))
	mustSee(t, tap, 0, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "a heartbeat over https")
	mustSee(t, tap, 0, "GET", `^/eureka/apps/delta$`, ok200, "a delta fetch over https")
	a.waitSees(a.App, a.ID, "itself, fetched over https", statusIs("UP"))
	mark := tap.Len()
	a.Stop()
	mustSee(t, tap, mark, "DELETE", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "the cancel at shutdown over https")
	waitGoneFromNode(t, node, node.URL(), tap, mark, a, "cancelled over https at shutdown")
	noErrors(t, tap, c.name)
}

// decoded is a driver's /control/decode: the registry fetched by hand and
// decoded with one of eureka-client's codecs.
type decoded struct {
	Code        int    `json:"code"`
	ContentType string `json:"contentType"`
	Encoding    string `json:"encoding"`
	Hashcode    string `json:"hashcode"`
	Instances   int    `json:"instances"`
	SelfStatus  string `json:"selfStatus"`
	SelfPort    int    `json:"selfPort"`
	SelfTeam    string `json:"selfTeam"`
}

// codecs: the registry, full and delta, JSON and XML, with and without
// gzip, read by every codec eureka-client configures (eureka.decoderName),
// as a client set to that codec reads it.
func codecs(t *testing.T, c client) {
	node := interoptest.NewNode(t).Start()
	tap := interoptest.NewWireTap(t, node.Base())
	var a *app
	logWire(t, tap, func() *app { return a })
	a = startApp(t, c, c.name+"-codec", []string{tap.URL() + "/eureka/"}, nil)
	waitOnNode(t, node, tap, 0, a, "registered UP", nodeStatusIs("UP"))
	for _, k := range []struct{ codec, accept, path string }{
		{"JacksonJson", "application/json", "apps/"},
		{"LegacyJacksonJson", "application/json", "apps/"},
		{"XStreamJson", "application/json", "apps/"},
		{"XStreamXml", "application/xml", "apps/"},
		{"JacksonJson", "application/json", "apps/delta"},
		{"XStreamXml", "application/xml", "apps/delta"},
	} {
		for _, gzip := range []bool{false, true} {
			what := fmt.Sprintf("%s of %s (Accept %s, gzip %v)", k.codec, k.path, k.accept, gzip)
			mark := tap.Len()
			var d decoded
			code, b, err := getJSON(a, fmt.Sprintf("/control/decode?codec=%s&accept=%s&gzip=%v&path=%s", k.codec, url.QueryEscape(k.accept), gzip, k.path), &d)
			if err != nil || code != http.StatusOK {
				t.Fatalf("%s: the driver could not decode: %d %v %s\n%s", what, code, err, b, wire(tap, mark))
			}
			wantType := strings.TrimPrefix(k.accept, "application/")
			wantEnc := ""
			if gzip {
				wantEnc = "gzip"
			}
			_, apps, _ := nodeCall(node, http.MethodGet, node.URL()+"apps")
			var full struct {
				Applications struct {
					Hashcode string `json:"apps__hashcode"`
				} `json:"applications"`
			}
			_ = json.Unmarshal(apps, &full)
			if d.Code != http.StatusOK || !strings.Contains(d.ContentType, wantType) || d.Encoding != wantEnc ||
				d.Instances < 1 || d.SelfStatus != "UP" || d.SelfPort != a.Port || d.SelfTeam != "interop" ||
				d.Hashcode != full.Applications.Hashcode {
				t.Fatalf("%s: decoded %+v; want 200 %s %q, the instance UP on port %d with team=interop, hashcode %s\n%s",
					what, d, wantType, wantEnc, a.Port, full.Applications.Hashcode, wire(tap, mark))
			}
		}
	}
	noErrors(t, tap, c.name)
}

// compact: a client with eureka.clientDataAccept=compact sends
// X-Eureka-Accept on every request and decodes with JacksonJsonMini; it
// is served the form the Java server would serve it (compact: no metadata,
// no overriddenStatus), registers, fetches deltas without a hashcode
// mismatch, sees status changes, and registers again after a heartbeat 404.
func compact(t *testing.T, c client) {
	node := evictingNode(t).Start()
	tap := interoptest.NewWireTap(t, node.Base())
	var a *app
	logWire(t, tap, func() *app { return a })
	a = startApp(t, c, c.name+"-compact", []string{tap.URL() + "/eureka/"}, nil, "--archaius.eureka.clientDataAccept=compact")
	waitOnNode(t, node, tap, 0, a, "registered UP", nodeStatusIs("UP"))
	mustSee(t, tap, 0, "GET", `^/eureka/apps/delta$`, ok200, "a delta fetch")
	// Every fetch asks X-Eureka-Accept. Where it says compact, the compact
	// form carries no metadata: the client's copy of itself has none,
	// though the node has it, which proves that form was served.
	// eureka-client-jersey3 2.0 sends the header as "[compact]" (a list
	// printed as a string), which the Java server's EurekaAccept.fromString
	// reads as full, and so does Muster: that client gets the full form.
	gets := tap.Find(0, "GET", "/eureka/apps")
	sent := gets[0].EurekaAccept
	for _, e := range gets {
		if e.EurekaAccept != sent || sent == "" {
			t.Fatalf("the fetches do not all send one X-Eureka-Accept\n%s", wire(tap, 0))
		}
	}
	wantMeta := !strings.EqualFold(sent, "compact")
	var last error
	if !poll(30*time.Second, func() error {
		st, err := a.state()
		if err == nil {
			if s := st.find(a.App, a.ID); s == nil {
				err = fmt.Errorf("not in its registry")
			} else if s.Status != "UP" || (len(s.Metadata) != 0) != wantMeta {
				err = fmt.Errorf("status %s metadata %v; want UP, metadata %v (X-Eureka-Accept %q)", s.Status, s.Metadata, wantMeta, sent)
			}
		}
		last = err
		return err
	}) {
		t.Fatalf("the client's copy of itself: %v\n%s", last, wire(tap, 0))
	}
	phase := tap.Len()
	a.setStatus("DOWN")
	waitOnNode(t, node, tap, phase, a, "its own DOWN", nodeStatusIs("DOWN"))
	a.waitSees(a.App, a.ID, "itself DOWN", statusIs("DOWN"))
	a.setStatus("UP")
	a.waitSees(a.App, a.ID, "itself UP again", statusIs("UP"))
	if st := a.mustState(); st.Mismatches != 0 || count(tap, phase, "GET", `^/eureka/apps/?$`) != 0 {
		t.Fatalf("compact deltas: %d hashcode mismatches, %d full fetches; want none\n%s", st.Mismatches, count(tap, phase, "GET", `^/eureka/apps/?$`), wire(tap, phase))
	}
	mark := tap.Len()
	if code, b, err := nodeCall(node, http.MethodDelete, node.URL()+"apps/"+a.App+"/"+a.ID); err != nil || code != http.StatusOK {
		t.Fatalf("operator cancel: %d %v %s", code, err, b)
	}
	mustSee(t, tap, mark, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), got404, "the heartbeat after the operator's cancel")
	waitOnNode(t, node, tap, mark, a, "registered again", nodeStatusIs("UP"))
	reregistersMatch(t, a, tap)
	noErrors(t, tap, c.name)
}
