package scripted

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

// wait is how long a scenario waits for one thing a client does: its
// timers run every second, so this is many rounds.
const wait = 30 * time.Second

// clientKind is one client library and how its driver runs.
type clientKind struct {
	name  string // library and version, for messages
	src   string // build source, relative to the repository
	label string // short name for app names: JS, PY
	// serviceURL is what the client's configuration takes for a node's
	// Eureka base URL (http://host:port/eureka/).
	serviceURL func(base string) string
	command    func(dir string) *exec.Cmd
	// ownStatus: the client can change its own status and remove its
	// override (py-eureka-client can, eureka-js-client has no API for it).
	ownStatus bool
	// deltaNewApps: the client's delta merge adds apps its cache does not
	// have yet (eureka-js-client does, py-eureka-client does not).
	deltaNewApps bool
	// hashCheck: the client compares its delta-merged view with the
	// server's apps__hashcode and fetches the whole registry on a mismatch.
	hashCheck bool
	// fetchAccept is the Accept header the client sends on registry
	// fetches, and fetchType the Content-Type it must be answered with.
	fetchAccept, fetchType string
	// heartbeatQuery says whether heartbeats carry a query string
	// (eureka-js-client sends none).
	heartbeatQuery bool
	// stackDump is the signal on which the driver prints its threads'
	// stacks, if it has one.
	stackDump os.Signal
}

var jsClient = clientKind{
	name: "eureka-js-client 4.5.0", src: "interop/jsclient", label: "JS",
	// The client appends the app name to its service URLs, which end in
	// apps/ (its README's form).
	serviceURL: func(base string) string { return base + "apps/" },
	command: func(dir string) *exec.Cmd {
		return exec.Command("node", filepath.Join(dir, "driver.js"))
	},
	fetchAccept: "application/json", fetchType: "application/json",
	deltaNewApps: true,
}

var pyClient = clientKind{
	name: "py-eureka-client 0.13.3", src: "interop/pyclient", label: "PY",
	serviceURL: func(base string) string { return base },
	command: func(dir string) *exec.Cmd {
		return exec.Command(filepath.Join(dir, "venv", "bin", "python"), "-u", filepath.Join(dir, "driver.py"))
	},
	ownStatus: true, hashCheck: true,
	// No Accept header at all: the client parses XML.
	fetchAccept: "", fetchType: "application/xml", heartbeatQuery: true,
	stackDump: syscall.SIGUSR1,
}

// driverConfig is the JSON the drivers read from $DRIVER_CONFIG.
type driverConfig struct {
	ServiceURLs  []string          `json:"serviceUrls"`
	App          string            `json:"app"`
	InstanceID   string            `json:"instanceId"`
	Port         int               `json:"port"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Delta        bool              `json:"delta,omitempty"`
	DurationSecs int               `json:"durationSecs,omitempty"`
	// HeartbeatSecs is the heartbeat (and fetch) interval; 1 when unset.
	HeartbeatSecs int    `json:"heartbeatSecs,omitempty"`
	CAFile        string `json:"caFile,omitempty"`
	// NoFetch keeps the client from fetching the registry: for scenarios
	// about registration alone (py-eureka-client's heartbeat thread can
	// deadlock on a full fetch that follows a failed request, see
	// docs/clients.md, which a node restart provokes).
	NoFetch bool `json:"noFetch,omitempty"`
}

// driver is one running client.
type driver struct {
	t     *testing.T
	kind  clientKind
	cfg   driverConfig
	proc  *interoptest.Process
	stdin io.WriteCloser
	auth  []string // user and password the test reads the node with, if it needs them
}

// built is the client's build folder, built once per source content.
func built(t *testing.T, k clientKind) string {
	return interoptest.Built(t, interoptest.Source(t, k.src))
}

func startDriver(t *testing.T, k clientKind, dir string, cfg driverConfig) *driver {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := k.command(dir)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "DRIVER_CONFIG="+string(b))
	if cfg.CAFile != "" {
		// httpx, under py-eureka-client, trusts the CA bundle named here.
		cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+cfg.CAFile)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, kind: k, cfg: cfg, stdin: stdin}
	d.proc = interoptest.Start(t, k.name+" "+cfg.InstanceID, cmd)
	return d
}

// cleanEnv is the environment without proxy settings (both clients honour
// them, and every target here is loopback).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_PROXY=*", "PYTHONUNBUFFERED=1")
}

func (d *driver) send(cmd string) {
	d.t.Helper()
	if _, err := io.WriteString(d.stdin, cmd+"\n"); err != nil {
		d.t.Fatalf("%s: command %q: %v\n%s", d.kind.name, cmd, err, d.proc.Out.Tail(3000))
	}
}

// event waits for the first JSON line from mark on whose "event" is name.
func (d *driver) event(mark int, name string) map[string]any {
	d.t.Helper()
	var got map[string]any
	testwait.For(d.t, wait, d.kind.name+" prints "+name, func() error {
		for _, line := range d.proc.Out.Since(mark) {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["event"] == name {
				got = m
				return nil
			}
		}
		if d.proc.Exited() {
			d.t.Fatalf("%s exited:\n%s", d.kind.name, d.proc.Out.Tail(3000))
		}
		return fmt.Errorf("not yet")
	})
	return got
}

// viewInstance is one instance as the client's own registry cache holds it.
type viewInstance struct {
	ID       string            `json:"id"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
}

type view struct {
	Apps      map[string][]viewInstance `json:"apps"`
	LocalHash string                    `json:"localHash"`
	DeltaHash string                    `json:"deltaHash"`
}

func (v view) find(app, id string) (viewInstance, bool) {
	for _, in := range v.Apps[strings.ToUpper(app)] {
		if in.ID == id {
			return in, true
		}
	}
	return viewInstance{}, false
}

// view asks the client for its registry cache.
func (d *driver) view() view {
	d.t.Helper()
	mark := d.proc.Out.Len()
	d.send("apps")
	m := d.event(mark, "apps")
	b, _ := json.Marshal(m)
	var v view
	if err := json.Unmarshal(b, &v); err != nil {
		d.t.Fatal(err)
	}
	return v
}

// waitView waits until the client's cache satisfies cond.
func (d *driver) waitView(what string, tap *interoptest.WireTap, cond func(view) error) view {
	d.t.Helper()
	var last view
	deadline := time.Now().Add(wait)
	for {
		last = d.view()
		err := cond(last)
		if err == nil {
			return last
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: %s: %v\nits view: %+v\n%s", d.kind.name, what, err, last.Apps, d.wire(tap))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop asks the client to stop as an application does, and waits for it.
func (d *driver) stop() {
	d.t.Helper()
	mark := d.proc.Out.Len()
	d.send("stop")
	d.event(mark, "stopped")
	select {
	case <-d.proc.Done:
	case <-time.After(wait):
		d.t.Fatalf("%s did not exit after stop", d.kind.name)
	}
}

// wire is what a failure says: every exchange the tap saw, and the
// client's output.
func (d *driver) wire(taps ...*interoptest.WireTap) string {
	if d.kind.stackDump != nil && !d.proc.Exited() {
		// The driver prints every thread's stack: where a client that
		// went quiet is stuck.
		_ = d.proc.Cmd.Process.Signal(d.kind.stackDump)
		time.Sleep(500 * time.Millisecond)
	}
	var b strings.Builder
	for i, tap := range taps {
		if tap == nil {
			continue
		}
		fmt.Fprintf(&b, "wire %d (%s via %s):\n%s", i, d.kind.name, tap.URL(), tap.Dump(0))
	}
	fmt.Fprintf(&b, "client output:\n%s", d.proc.Out.Tail(2500))
	return b.String()
}

// nodeInstance is what a node says about one instance; code is the GET's
// status (404 when the node does not have it).
type nodeInstance struct {
	code     int
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
}

func getInstance(t *testing.T, n *interoptest.Node, app, id string, auth ...string) nodeInstance {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.URL()+"apps/"+strings.ToUpper(app)+"/"+id, nil)
	req.Header.Set("Accept", "application/json")
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	resp, err := n.HTTP.Do(req)
	if err != nil {
		return nodeInstance{code: 0}
	}
	defer resp.Body.Close()
	var doc struct {
		Instance nodeInstance `json:"instance"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatalf("GET instance %s/%s: %v", app, id, err)
		}
	}
	doc.Instance.code = resp.StatusCode
	return doc.Instance
}

// waitNode waits until the node's copy of the instance satisfies cond.
func waitNode(t *testing.T, d *driver, n *interoptest.Node, what string, cond func(nodeInstance) error, taps ...*interoptest.WireTap) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := cond(getInstance(t, n, d.cfg.App, d.cfg.InstanceID, d.auth...))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: %v\n%s", d.kind.name, what, err, d.wire(taps...))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func statusIs(want string) func(nodeInstance) error {
	return func(in nodeInstance) error {
		if in.code != http.StatusOK {
			return fmt.Errorf("GET answered %d", in.code)
		}
		if in.Status != want {
			return fmt.Errorf("status %s, want %s", in.Status, want)
		}
		return nil
	}
}

func gone(in nodeInstance) error {
	if in.code != http.StatusNotFound {
		return fmt.Errorf("GET answered %d, want 404", in.code)
	}
	return nil
}

// operator sends a request as an operator would with curl; it returns
// the status.
func operator(t *testing.T, n *interoptest.Node, method, path string) int {
	t.Helper()
	req, _ := http.NewRequest(method, n.URL()+path, nil)
	resp, err := n.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// register puts an instance on a node through the REST API, as another
// client would.
func register(t *testing.T, n *interoptest.Node, app, id string, port int) {
	t.Helper()
	body := `{"instance":{"instanceId":"` + id + `","hostName":"127.0.0.1","app":"` + strings.ToUpper(app) +
		`","ipAddr":"127.0.0.1","status":"UP","port":{"$":` + strconv.Itoa(port) + `,"@enabled":"true"},"vipAddress":"` +
		strings.ToLower(app) + `","dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}}}`
	resp, err := n.HTTP.Post(n.URL()+"apps/"+strings.ToUpper(app), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("register %s/%s: %d", app, id, resp.StatusCode)
	}
}

// sawWire waits until the tap has seen, from mark on, an exchange with
// this method, a path containing pathPart and this status; it fails
// naming the whole wire otherwise.
func sawWire(t *testing.T, d *driver, tap *interoptest.WireTap, mark int, method, pathPart string, status int, what string) interoptest.Exchange {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for _, e := range tap.Find(mark, method, pathPart) {
			if e.Status == status {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s: no %s %s answered %d on the wire\n%s", d.kind.name, what, method, pathPart, status, d.wire(tap))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newID is a fresh instance id and port for a scenario's client.
func newID(t *testing.T, k clientKind, scenario string) (app, id string, port int) {
	port = interoptest.FreePort(t)
	app = k.label + "-" + strings.ToUpper(scenario)
	return app, strings.ToLower(app) + "-" + strconv.Itoa(port), port
}
