package scripted

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-registry/muster/interop/interoptest"
)

func TestEurekaJSClient(t *testing.T) { runScenarios(t, jsClient) }

func TestPyEurekaClient(t *testing.T) { runScenarios(t, pyClient) }

// scenario is one thing a client must get through with Muster.
type scenario struct {
	name string
	run  func(t *testing.T, k clientKind, dir string)
}

var scenarios = []scenario{
	{"register", scenarioRegister},
	{"heartbeats", scenarioHeartbeats},
	{"fetch-then-deltas", scenarioFetchThenDeltas},
	{"status-override-and-removal", scenarioStatus},
	{"metadata", scenarioMetadata},
	{"cancel-on-shutdown", scenarioCancel},
	{"reregister-after-operator-cancel", scenarioOperatorCancel},
	{"reregister-after-eviction-and-restart", scenarioEvictionAndRestart},
	{"failover", scenarioFailover},
	{"basic-auth-in-url", scenarioBasicAuth},
	{"tls", scenarioTLS},
}

func runScenarios(t *testing.T, k clientKind) {
	dir := built(t, k)
	passed := 0
	for _, s := range scenarios {
		if t.Run(s.name, func(t *testing.T) { s.run(t, k, dir) }) {
			passed++
		}
	}
	t.Logf("%s (%s): %d of %d scenarios passed", k.name, k.src, passed, len(scenarios))
}

// tapped is one standalone node behind a wire tap, and a client of it.
func tapped(t *testing.T, k clientKind, dir, scenario string, delta bool, sets ...string) (*interoptest.Node, *interoptest.WireTap, *driver) {
	t.Helper()
	node := interoptest.NewNode(t, sets...).Start()
	tap := interoptest.NewWireTap(t, node.Base())
	app, id, port := newID(t, k, scenario)
	d := startDriver(t, k, dir, driverConfig{
		ServiceURLs: []string{k.serviceURL(tap.URL() + "/eureka/")},
		App:         app, InstanceID: id, Port: port, Delta: delta,
		Metadata: map[string]string{"zone": "zone-a", "team": "payments"},
	})
	d.event(0, "started")
	return node, tap, d
}

func scenarioRegister(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "register", false)
	waitNode(t, d, node, "the node has the instance, UP", statusIs("UP"), tap)
	reg := sawWire(t, d, tap, 0, http.MethodPost, "/eureka/apps/"+d.cfg.App, http.StatusNoContent, "the registration")
	if !strings.HasPrefix(reg.ContentType, "application/json") {
		t.Errorf("%s registered with Content-Type %q, want JSON\n%s", k.name, reg.ContentType, d.wire(tap))
	}
	d.waitView("its own instance in its registry cache", tap, func(v view) error {
		if in, ok := v.find(d.cfg.App, d.cfg.InstanceID); !ok || in.Status != "UP" {
			return fmt.Errorf("not there, or not UP")
		}
		return nil
	})
	mustNoFailures(t, d, tap)
}

func scenarioHeartbeats(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "heartbeats", false)
	waitNode(t, d, node, "registered", statusIs("UP"), tap)
	mark := tap.Len()
	path := "/eureka/apps/" + d.cfg.App + "/" + d.cfg.InstanceID
	for i := 0; i < 3; i++ {
		e := sawWire(t, d, tap, mark, http.MethodPut, path, http.StatusOK, fmt.Sprintf("heartbeat %d", i+1))
		if k.heartbeatQuery != (e.Query != "") {
			t.Errorf("%s heartbeat query %q: the client's known shape changed\n%s", k.name, e.Query, d.wire(tap))
		}
		if k.heartbeatQuery && !strings.Contains(e.Query, "lastDirtyTimestamp=") {
			t.Errorf("%s heartbeat without lastDirtyTimestamp: %q", k.name, e.Query)
		}
		mark = tap.Len()
	}
	for _, e := range tap.Find(0, http.MethodPut, path) {
		if e.Status != http.StatusOK {
			t.Errorf("%s: heartbeat answered %d, want 200\n%s", k.name, e.Status, d.wire(tap))
		}
	}
	waitNode(t, d, node, "still UP after the heartbeats", statusIs("UP"), tap)
}

// Full fetch first, then deltas: other instances come and go, change
// status and metadata, and the client's cache follows without another
// full fetch (py-eureka-client checks apps__hashcode after every merge
// and fetches everything on a mismatch: any second full fetch is one).
func scenarioFetchThenDeltas(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "deltas", true)
	waitNode(t, d, node, "registered", statusIs("UP"), tap)
	d.waitView("its own instance", tap, func(v view) error {
		if _, ok := v.find(d.cfg.App, d.cfg.InstanceID); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	// Where the other instances go: py-eureka-client's delta merge drops
	// instances of an app its cache does not have yet (its get_application
	// never returns None), so a new app always costs it a full fetch: its
	// others join its own app. eureka-js-client's merge of a MODIFIED or
	// DELETED instance splices index 0 of the app's list (docs/clients.md):
	// its others get an app each, where index 0 is the right one.
	type other struct{ app, id string }
	others := []other{{d.cfg.App, d.cfg.InstanceID + "-b"}, {d.cfg.App, d.cfg.InstanceID + "-c"}}
	if k.deltaNewApps {
		others[0].app, others[1].app = d.cfg.App+"-B", d.cfg.App+"-C"
	}
	for i, o := range others {
		register(t, node, o.app, o.id, 20000+i)
	}
	d.waitView("the other instances, added by deltas", tap, func(v view) error {
		for _, o := range others {
			if _, ok := v.find(o.app, o.id); !ok {
				return fmt.Errorf("%s missing", o.id)
			}
		}
		return nil
	})
	if code := operator(t, node, http.MethodPut, "apps/"+others[0].app+"/"+others[0].id+"/status?value=OUT_OF_SERVICE"); code != 200 {
		t.Fatalf("operator status: %d", code)
	}
	if code := operator(t, node, http.MethodDelete, "apps/"+others[1].app+"/"+others[1].id); code != 200 {
		t.Fatalf("operator cancel: %d", code)
	}
	last := d.waitView("the status change and the cancel, by deltas", tap, func(v view) error {
		in, ok := v.find(others[0].app, others[0].id)
		if !ok || in.Status != "OUT_OF_SERVICE" {
			return fmt.Errorf("%s: %+v, want OUT_OF_SERVICE", others[0].id, in)
		}
		if _, ok := v.find(others[1].app, others[1].id); ok {
			return fmt.Errorf("%s still there after its cancel", others[1].id)
		}
		return nil
	})
	deltas := tap.Find(0, http.MethodGet, "/eureka/apps/delta")
	if len(deltas) == 0 {
		t.Fatalf("%s fetched no delta\n%s", k.name, d.wire(tap))
	}
	for _, e := range tap.Find(0, http.MethodGet, "/eureka/apps/") {
		if e.Accept != k.fetchAccept || !strings.HasPrefix(e.RespType, k.fetchType) || e.Status != http.StatusOK {
			t.Errorf("%s fetch %s: Accept %q answered %d %q, want Accept %q answered 200 %q\n%s",
				k.name, e.Path, e.Accept, e.Status, e.RespType, k.fetchAccept, k.fetchType, d.wire(tap))
		}
	}
	full := 0
	for _, e := range tap.Find(0, http.MethodGet, "/eureka/apps/") {
		if e.Path == "/eureka/apps/" {
			full++
		}
	}
	if full != 1 {
		t.Errorf("%s made %d full fetches, want one and then deltas only (a hashcode mismatch refetches)\n%s", k.name, full, d.wire(tap))
	}
	if k.hashCheck {
		if last.LocalHash == "" || last.LocalHash != last.DeltaHash {
			t.Errorf("%s: its own hash %q, the server's %q", k.name, last.LocalHash, last.DeltaHash)
		}
	} else {
		t.Logf("%s has no hashcode check: its cache is compared with the node's instead", k.name)
	}
	mustNoFailures(t, d, tap)
}

// The client's status as an operator overrides it, and as the override is
// removed (the next heartbeat is answered 404 and the client registers
// again, UP); then, where the client can, its own status change.
func scenarioStatus(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "status", true)
	waitNode(t, d, node, "registered", statusIs("UP"), tap)
	path := "apps/" + d.cfg.App + "/" + d.cfg.InstanceID
	if code := operator(t, node, http.MethodPut, path+"/status?value=OUT_OF_SERVICE"); code != http.StatusOK {
		t.Fatalf("operator override: %d", code)
	}
	mark := tap.Len()
	sawWire(t, d, tap, mark, http.MethodPut, "/eureka/"+path, http.StatusOK, "a heartbeat under the override")
	waitNode(t, d, node, "the override holds through heartbeats", statusIs("OUT_OF_SERVICE"), tap)
	d.waitView("the override in the client's own cache", tap, func(v view) error {
		if in, _ := v.find(d.cfg.App, d.cfg.InstanceID); in.Status != "OUT_OF_SERVICE" {
			return fmt.Errorf("status %q", in.Status)
		}
		return nil
	})
	mark = tap.Len()
	if code := operator(t, node, http.MethodDelete, path+"/status"); code != http.StatusOK {
		t.Fatalf("operator override removal: %d", code)
	}
	sawWire(t, d, tap, mark, http.MethodPut, "/eureka/"+path, http.StatusNotFound, "the heartbeat 404 after the removal")
	sawWire(t, d, tap, mark, http.MethodPost, "/eureka/apps/"+d.cfg.App, http.StatusNoContent, "the registration after the 404")
	waitNode(t, d, node, "UP again once registered again", statusIs("UP"), tap)
	if !k.ownStatus {
		t.Logf("%s has no API to change its own status: only the operator's override is tested", k.name)
		return
	}
	mark = tap.Len()
	d.send("status DOWN")
	sawWire(t, d, tap, mark, http.MethodPut, "/eureka/"+path+"/status", http.StatusOK, "the client's own status change")
	waitNode(t, d, node, "the client's own DOWN", statusIs("DOWN"), tap)
	d.waitView("its own DOWN in its cache", tap, func(v view) error {
		if in, _ := v.find(d.cfg.App, d.cfg.InstanceID); in.Status != "DOWN" {
			return fmt.Errorf("status %q", in.Status)
		}
		return nil
	})
	mark = tap.Len()
	d.send("override-delete")
	sawWire(t, d, tap, mark, http.MethodDelete, "/eureka/"+path+"/status", http.StatusOK, "the client's own override removal")
	// The removal leaves UNKNOWN; the next heartbeat is refused and the
	// client registers again with the status it holds.
	sawWire(t, d, tap, mark, http.MethodPost, "/eureka/apps/"+d.cfg.App, http.StatusNoContent, "the registration after the removal")
	waitNode(t, d, node, "registered again after removing its override", func(in nodeInstance) error {
		if in.code != 200 || in.Status == "UNKNOWN" {
			return fmt.Errorf("%d %s", in.code, in.Status)
		}
		return nil
	}, tap)
}

func scenarioMetadata(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "metadata", true)
	waitNode(t, d, node, "registered with its metadata", func(in nodeInstance) error {
		if err := statusIs("UP")(in); err != nil {
			return err
		}
		if in.Metadata["zone"] != "zone-a" || in.Metadata["team"] != "payments" {
			return fmt.Errorf("metadata %v", in.Metadata)
		}
		return nil
	}, tap)
	if code := operator(t, node, http.MethodPut, "apps/"+d.cfg.App+"/"+d.cfg.InstanceID+"/metadata?build=42&canary=true"); code != http.StatusOK {
		t.Fatalf("operator metadata: %d", code)
	}
	d.waitView("the registered and the operator's metadata in the client's cache", tap, func(v view) error {
		in, ok := v.find(d.cfg.App, d.cfg.InstanceID)
		if !ok || in.Metadata["zone"] != "zone-a" || in.Metadata["build"] != "42" || in.Metadata["canary"] != "true" {
			return fmt.Errorf("%+v", in)
		}
		return nil
	})
	mustNoFailures(t, d, tap)
}

func scenarioCancel(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "cancel", false)
	waitNode(t, d, node, "registered", statusIs("UP"), tap)
	mark := tap.Len()
	d.stop()
	sawWire(t, d, tap, mark, http.MethodDelete, "/eureka/apps/"+d.cfg.App+"/"+d.cfg.InstanceID, http.StatusOK, "the cancel at shutdown")
	waitNode(t, d, node, "gone at once after the shutdown", gone, tap)
	if out := strings.Join(d.proc.Out.Match(0, `deregistration FAILED|Cancel error`), "\n"); out != "" {
		t.Errorf("%s says its cancel failed: %s\n%s", k.name, out, d.wire(tap))
	}
}

func scenarioOperatorCancel(t *testing.T, k clientKind, dir string) {
	node, tap, d := tapped(t, k, dir, "opcancel", false)
	waitNode(t, d, node, "registered", statusIs("UP"), tap)
	mark := tap.Len()
	if code := operator(t, node, http.MethodDelete, "apps/"+d.cfg.App+"/"+d.cfg.InstanceID); code != http.StatusOK {
		t.Fatalf("operator cancel: %d", code)
	}
	sawWire(t, d, tap, mark, http.MethodPut, "/eureka/apps/"+d.cfg.App+"/"+d.cfg.InstanceID, http.StatusNotFound, "the heartbeat 404 after the operator's cancel")
	sawWire(t, d, tap, mark, http.MethodPost, "/eureka/apps/"+d.cfg.App, http.StatusNoContent, "the registration after the 404")
	waitNode(t, d, node, "registered again", statusIs("UP"), tap)
}

// A late client (its heartbeats further apart than its lease is long) is
// evicted between two heartbeats; the next one is answered 404 and it
// registers again. So does a client whose node restarts without a data
// dir. Late, not cut off: py-eureka-client 0.13.3 deadlocks its heartbeat
// thread when, after a failed request, a delta needs a full fetch (its
// fetch takes the client's asyncio lock and the full fetch waits for the
// same lock), so a partition would test the client's bug, not Muster.
func scenarioEvictionAndRestart(t *testing.T, k clientKind, dir string) {
	node := interoptest.NewNode(t, "eureka.server.enable-self-preservation=false",
		"eureka.server.eviction-interval-timer-in-ms=200").Start()
	tap := interoptest.NewWireTap(t, node.Base())
	app, id, port := newID(t, k, "evict")
	d := startDriver(t, k, dir, driverConfig{
		ServiceURLs: []string{k.serviceURL(tap.URL() + "/eureka/")},
		App:         app, InstanceID: id, Port: port, DurationSecs: 1, HeartbeatSecs: 4,
		NoFetch: true, // re-registration alone; a fetch during the restart's gap trips py's deadlock
	})
	waitNode(t, d, node, "registered", statusIs("UP"), tap)
	mark := tap.Len()
	waitNode(t, d, node, "evicted between two heartbeats", gone, tap)
	sawWire(t, d, tap, mark, http.MethodPut, "/eureka/apps/"+app+"/"+id, http.StatusNotFound, "the late heartbeat's 404")
	sawWire(t, d, tap, mark, http.MethodPost, "/eureka/apps/"+app, http.StatusNoContent, "the registration after the eviction")
	waitNode(t, d, node, "registered again after the eviction", statusIs("UP"), tap)

	node.Stop()
	mark = tap.Len()
	node.Start()
	sawWire(t, d, tap, mark, http.MethodPost, "/eureka/apps/"+app, http.StatusNoContent, "the registration on the restarted node")
	waitNode(t, d, node, "registered on the node restarted without a data dir", statusIs("UP"), tap)
	t.Logf("%s after the restart: %s", k.name, strings.ReplaceAll(tap.Dump(mark), "\n", "; "))
}

// Two nodes (standalone: nothing replicates between them); the client
// lists both. When the first stops answering, the client's heartbeats go
// to the second, which does not know it (404), and it registers there.
func scenarioFailover(t *testing.T, k clientKind, dir string) {
	a := interoptest.NewNode(t).Start()
	b := interoptest.NewNode(t).Start()
	tapA, tapB := interoptest.NewWireTap(t, a.Base()), interoptest.NewWireTap(t, b.Base())
	app, id, port := newID(t, k, "failover")
	d := startDriver(t, k, dir, driverConfig{
		ServiceURLs: []string{k.serviceURL(tapA.URL() + "/eureka/"), k.serviceURL(tapB.URL() + "/eureka/")},
		App:         app, InstanceID: id, Port: port, Delta: true,
	})
	waitNode(t, d, a, "registered on the first node", statusIs("UP"), tapA, tapB)
	register(t, b, "ONLY-ON-B", "only-on-b-1", 21000)
	tapA.SetCut(true)
	waitNode(t, d, b, "registered on the second node once the first is cut off", statusIs("UP"), tapA, tapB)
	sawWire(t, d, tapB, 0, http.MethodPost, "/eureka/apps/"+app, http.StatusNoContent, "the registration on the second node")
	d.waitView("the second node's registry in the client's cache", tapB, func(v view) error {
		if _, ok := v.find("ONLY-ON-B", "only-on-b-1"); !ok {
			return fmt.Errorf("ONLY-ON-B missing")
		}
		return nil
	})
	mark := tapB.Len()
	sawWire(t, d, tapB, mark, http.MethodPut, "/eureka/apps/"+app+"/"+id, http.StatusOK, "heartbeats on the second node")
}

func scenarioBasicAuth(t *testing.T, k clientKind, dir string) {
	node := interoptest.NewNode(t, "spring.security.user.name=admin", "spring.security.user.password=admin-pw",
		"muster.auth.users.svc.password={noop}svc-pw", "muster.auth.users.svc.role=write").Start()
	tap := interoptest.NewWireTap(t, node.Base())
	app, id, port := newID(t, k, "auth")
	withCreds := strings.Replace(tap.URL(), "http://", "http://svc:svc-pw@", 1) + "/eureka/"
	d := startDriver(t, k, dir, driverConfig{
		ServiceURLs: []string{k.serviceURL(withCreds)},
		App:         app, InstanceID: id, Port: port, Delta: true,
	})
	if in := getInstance(t, node, app, id); in.code != http.StatusUnauthorized {
		t.Fatalf("GET without credentials: %d, want 401 (is authentication on?)", in.code)
	}
	d.auth = []string{"admin", "admin-pw"}
	waitNode(t, d, node, "registered with the credentials from the URL", statusIs("UP"), tap)
	mark := tap.Len()
	sawWire(t, d, tap, mark, http.MethodPut, "/eureka/apps/"+app+"/"+id, http.StatusOK, "heartbeats with the credentials")
	sawWire(t, d, tap, 0, http.MethodGet, "/eureka/apps/", http.StatusOK, "fetches with the credentials")
	for _, e := range tap.Since(0) {
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
			t.Fatalf("%s was refused: %s\n%s", k.name, e, d.wire(tap))
		}
	}
	mark = tap.Len()
	d.stop()
	sawWire(t, d, tap, mark, http.MethodDelete, "/eureka/apps/"+app+"/"+id, http.StatusOK, "the cancel with the credentials")
}

// TLS: the node serves https with a certificate from its own CA (muster
// tls); the client trusts that CA its own way (eureka-js-client through
// its request middleware, py-eureka-client through httpx's SSL_CERT_FILE),
// through a tap that serves https with the node's certificate.
func scenarioTLS(t *testing.T, k clientKind, dir string) {
	certs := t.TempDir()
	bin := interoptest.Binary(t)
	for _, args := range [][]string{
		{"tls", "ca", "--out-dir", certs},
		{"tls", "cert", "--out-dir", certs, "--name", "node", "--ip", "127.0.0.1"},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ca, cert, key := filepath.Join(certs, "muster-ca.pem"), filepath.Join(certs, "node.pem"), filepath.Join(certs, "node-key.pem")
	node := interoptest.NewNode(t)
	node.UseTLS(cert, key, ca)
	node.Start()
	tap := interoptest.NewTLSWireTap(t, node.Base(), cert, key, ca)
	app, id, port := newID(t, k, "tls")
	d := startDriver(t, k, dir, driverConfig{
		ServiceURLs: []string{k.serviceURL(tap.URL() + "/eureka/")},
		App:         app, InstanceID: id, Port: port, Delta: true, CAFile: ca,
	})
	waitNode(t, d, node, "registered over https", statusIs("UP"), tap)
	sawWire(t, d, tap, 0, http.MethodPut, "/eureka/apps/"+app+"/"+id, http.StatusOK, "a heartbeat over https")
	d.waitView("its registry fetched over https", tap, func(v view) error {
		if _, ok := v.find(app, id); !ok {
			return fmt.Errorf("its own instance missing")
		}
		return nil
	})
	mark := tap.Len()
	d.stop()
	sawWire(t, d, tap, mark, http.MethodDelete, "/eureka/apps/"+app+"/"+id, http.StatusOK, "the cancel over https")
	waitNode(t, d, node, "cancelled over https", gone, tap)
	if !strings.HasPrefix(tap.URL(), "https://") {
		t.Fatalf("the tap is not https: %s", tap.URL())
	}
}

// mustNoFailures fails when the client said a request of its failed, or
// the wire shows an answer no scenario here expects (a 4xx other than a
// heartbeat's 404, a 5xx).
func mustNoFailures(t *testing.T, d *driver, tap *interoptest.WireTap) {
	t.Helper()
	for _, e := range tap.Since(0) {
		if e.Status >= 400 && !(e.Method == http.MethodPut && e.Status == http.StatusNotFound) {
			t.Errorf("%s: unexpected answer %s\n%s", d.kind.name, e, d.wire(tap))
		}
	}
	if bad := d.proc.Out.Match(0, `"event": ?"error"|FAILED|Unable to retrieve|Error fetching`); len(bad) > 0 {
		t.Errorf("%s reported failures:\n%s\n%s", d.kind.name, strings.Join(bad, "\n"), d.wire(tap))
	}
}
