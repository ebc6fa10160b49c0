package spring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

// client is one Java client as the scenarios run it: a build source and
// the settings that pick its transport.
type client struct {
	name      string   // the subtest's name, and the start of its app names
	src       string   // build source folder, from the repository root
	args      []string // --key=value settings on top of the app's own
	transport string   // what the app reports as its transport: proof the setting took
	spring    bool     // a Spring app: /actuator/serviceregistry is there
	main      string   // a driver's main class, run from target/classes and target/lib; "" runs target/app.jar
	// wrap, if set, is the command the JVM runs under (its arguments
	// end with the program to exec: "java" and its own arguments follow).
	wrap []string
}

var clients = []client{
	{name: "boot4-restclient", src: "interop/spring/boot4-client", transport: "RestClientDiscoveryClientOptionalArgs", spring: true},
	{name: "boot4-webclient", src: "interop/spring/boot4-client", args: []string{"--eureka.client.webclient.enabled=true"},
		transport: "WebClientDiscoveryClientOptionalArgs", spring: true},
	{name: "boot3-resttemplate", src: "interop/spring/boot3-client", transport: "RestTemplateDiscoveryClientOptionalArgs", spring: true},
	{name: "boot3-restclient", src: "interop/spring/boot3-client", args: []string{"--eureka.client.restclient.enabled=true"},
		transport: "RestClientDiscoveryClientOptionalArgs", spring: true},
	{name: "eureka2-jersey3", src: "interop/spring/eureka2-driver", transport: "Jersey3TransportClientFactories",
		main: "muster.interop.driver.EurekaDriver"},
	{name: "eureka1-jersey1", src: "interop/spring/eureka1-driver", transport: "Jersey1TransportClientFactories",
		main: "muster.interop.driver.EurekaDriver"},
}

// jvmSlots bounds the JVMs running at once: the machine has two cores, and
// a Spring app's start is CPU-bound.
var jvmSlots = make(chan struct{}, 3)

func takeJVMSlot(t *testing.T) {
	jvmSlots <- struct{}{}
	t.Cleanup(func() { <-jvmSlots })
}

// jvmFlags keep each JVM small: a team's container settings for a sidecar
// client, not a tuned server.
var jvmFlags = []string{"-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}

// app is one client process, steered over its own HTTP port.
type app struct {
	t         *testing.T
	App       string // the Eureka application name (upper case)
	ID        string // the instance id
	Port      int    // the app's own HTTP port, which it registers
	Transport string
	proc      *interoptest.Process
	http      *http.Client
}

var readyLine = regexp.MustCompile(`MUSTER-READY port=(\d+) id=(\S+) transport=(\S+)`)

// startApp builds (once) and starts c as application name with the given
// service URLs, and waits until it is up. jvm are extra JVM flags, extra
// extra --key=value settings.
func startApp(t *testing.T, c client, name string, urls []string, jvm []string, extra ...string) *app {
	t.Helper()
	return startAppAs(t, c, name, name+"-1", urls, jvm, extra...)
}

// startAppAs is startApp with the instance id given: a replacement of an
// instance, as a Deployment's new pod, comes with an id of its own.
func startAppAs(t *testing.T, c client, name, id string, urls []string, jvm []string, extra ...string) *app {
	t.Helper()
	dir := interoptest.Built(t, interoptest.Source(t, c.src))
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("SKIP: no java on PATH")
	}
	args := append(append([]string{}, jvmFlags...), jvm...)
	if c.main != "" {
		args = append(args, "-cp", filepath.Join(dir, "target", "classes")+string(filepath.ListSeparator)+filepath.Join(dir, "target", "lib", "*"), c.main)
	} else {
		args = append(args, "-jar", filepath.Join(dir, "target", "app.jar"))
	}
	args = append(args, "--spring.application.name="+name,
		"--eureka.instance.instance-id="+id,
		"--eureka.client.service-url.defaultZone="+strings.Join(urls, ","),
		"--eureka.instance.metadata-map.team=interop")
	args = append(args, c.args...)
	args = append(args, extra...)
	cmd := exec.Command("java", args...)
	if len(c.wrap) > 0 {
		cmd = exec.Command(c.wrap[0], append(append(c.wrap[1:len(c.wrap):len(c.wrap)], "java"), args...)...)
	}
	a := &app{t: t, App: strings.ToUpper(name), ID: id, http: &http.Client{Timeout: 10 * time.Second}}
	a.proc = interoptest.Start(t, name, cmd)
	t.Cleanup(a.Stop)
	testwait.For(t, 150*time.Second, name+" starts and prints MUSTER-READY", func() error {
		if a.proc.Exited() {
			t.Fatalf("%s exited at start:\n%s", name, a.proc.Out.Tail(4000))
		}
		m := a.proc.Out.Match(0, readyLine.String())
		if len(m) == 0 {
			return fmt.Errorf("not ready yet")
		}
		sub := readyLine.FindStringSubmatch(m[0])
		a.Port, _ = strconv.Atoi(sub[1])
		a.Transport = sub[3]
		if sub[2] != id {
			t.Fatalf("%s registers as %q, want %q", name, sub[2], id)
		}
		return nil
	})
	if c.transport != "" && a.Transport != c.transport {
		t.Fatalf("%s runs with %s, want %s (is the transport setting right?)", name, a.Transport, c.transport)
	}
	return a
}

// Stop ends the app as an orchestrator does, with SIGTERM (a JVM started
// from a shell in the background ignores SIGINT), so that Spring shuts
// down gracefully and the client cancels its registration.
func (a *app) Stop() {
	p := a.proc
	if p == nil || p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		p.Kill()
	}
}

func (a *app) base() string { return "http://127.0.0.1:" + strconv.Itoa(a.Port) }

// seen is one instance as the client's fetched registry holds it.
type seen struct {
	App        string            `json:"app"`
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	Overridden string            `json:"overridden"`
	Port       int               `json:"port"`
	Metadata   map[string]string `json:"metadata"`
}

// state is the app's /control/state.
type state struct {
	Self         string              `json:"self"`
	Reregister   int64               `json:"reregister"`
	Mismatches   int64               `json:"mismatches"`
	AppsHashCode string              `json:"appsHashCode"`
	Instances    []seen              `json:"instances"`
	Services     map[string][]string `json:"services"`
}

func (s state) find(app, id string) *seen {
	for i := range s.Instances {
		if strings.EqualFold(s.Instances[i].App, app) && s.Instances[i].ID == id {
			return &s.Instances[i]
		}
	}
	return nil
}

func (a *app) state() (state, error) {
	var st state
	resp, err := a.http.Get(a.base() + "/control/state")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("/control/state: %d %s", resp.StatusCode, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func (a *app) mustState() state {
	a.t.Helper()
	st, err := a.state()
	if err != nil {
		a.t.Fatal(err)
	}
	return st
}

// post sends a POST to the app and fails the test unless it answers 2xx.
func (a *app) post(path, contentType, body string) {
	a.t.Helper()
	resp, err := a.http.Post(a.base()+path, contentType, strings.NewReader(body))
	if err != nil {
		a.t.Fatalf("POST %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		a.t.Fatalf("POST %s %s: %d %s", path, body, resp.StatusCode, b)
	}
}

// getText GETs path from the app and returns the status and body.
func getText(a *app, path string) (int, []byte, error) {
	resp, err := a.http.Get(a.base() + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// getJSON GETs path from the app and decodes its JSON answer into v.
func getJSON(a *app, path string, v any) (int, []byte, error) {
	resp, err := a.http.Get(a.base() + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, b, err
	}
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(b, v)
	}
	return resp.StatusCode, b, err
}

// setStatus sets the app's own status, as a health check does.
func (a *app) setStatus(status string) { a.post("/control/status?value="+status, "", "") }

func (a *app) setMetadata(key, value string) {
	a.post("/control/metadata?key="+key+"&value="+value, "", "")
}

// serviceRegistry posts to Spring's /actuator/serviceregistry: a status
// override, or CANCEL_OVERRIDE to remove it.
func (a *app) serviceRegistry(status string) {
	a.post("/actuator/serviceregistry", "application/json", `{"status":"`+status+`"}`)
}

// waitSees waits until the client's fetched registry has app/id matching want.
func (a *app) waitSees(app, id, what string, want func(*seen) error) {
	a.t.Helper()
	testwait.For(a.t, 30*time.Second, a.App+" sees "+what, func() error {
		st, err := a.state()
		if err != nil {
			return err
		}
		s := st.find(app, id)
		if s == nil {
			return fmt.Errorf("%s/%s not in its registry (%d instances)", app, id, len(st.Instances))
		}
		return want(s)
	})
}

func statusIs(status string) func(*seen) error {
	return func(s *seen) error {
		if s.Status != status {
			return fmt.Errorf("status %s, want %s", s.Status, status)
		}
		return nil
	}
}

// instance is an instance as a Muster node answers it (JSON).
type instance struct {
	Status      string            `json:"status"`
	Overridden  string            `json:"overriddenStatus"`
	Overridden2 string            `json:"overriddenstatus"`
	Metadata    map[string]string `json:"metadata"`
	Port        struct {
		Value int `json:"$"`
	} `json:"port"`
}

func (i instance) override() string {
	if i.Overridden != "" {
		return i.Overridden
	}
	return i.Overridden2
}

// nodeCall sends a request to a node (base: its Eureka URL, credentials
// in it if any) and returns the status and body.
func nodeCall(n *interoptest.Node, method, url string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if u := req.URL.User; u != nil {
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
		req.URL.User = nil
	}
	resp, err := n.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// getInstance is app/id as the node holds it; err says 404 where it has none.
func getInstance(n *interoptest.Node, eurekaURL, app, id string) (instance, error) {
	var body struct {
		Instance instance `json:"instance"`
	}
	code, b, err := nodeCall(n, http.MethodGet, eurekaURL+"apps/"+app+"/"+id)
	if err != nil {
		return body.Instance, err
	}
	if code != http.StatusOK {
		return body.Instance, fmt.Errorf("GET apps/%s/%s: %d", app, id, code)
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return body.Instance, fmt.Errorf("GET apps/%s/%s: %v: %s", app, id, err, b)
	}
	return body.Instance, nil
}

// waitOnNode waits until the node has app/id and want holds for it; the
// failure lists the exchanges the client had through tap since from.
func waitOnNode(t *testing.T, n *interoptest.Node, tap *interoptest.WireTap, from int, a *app, what string, want func(instance) error) {
	t.Helper()
	waitOnNodeURL(t, n, n.URL(), tap, from, a, what, want)
}

func waitOnNodeURL(t *testing.T, n *interoptest.Node, eurekaURL string, tap *interoptest.WireTap, from int, a *app, what string, want func(instance) error) {
	t.Helper()
	var last error
	ok := poll(45*time.Second, func() error {
		i, err := getInstance(n, eurekaURL, a.App, a.ID)
		if err == nil {
			err = want(i)
		}
		last = err
		return err
	})
	if !ok {
		t.Fatalf("%s: %s: %v\n%s", a.App, what, last, wire(tap, from))
	}
}

// waitGoneFromNode waits until the node answers 404 for the app's instance.
func waitGoneFromNode(t *testing.T, n *interoptest.Node, eurekaURL string, tap *interoptest.WireTap, from int, a *app, what string) {
	t.Helper()
	var last error
	ok := poll(45*time.Second, func() error {
		_, err := getInstance(n, eurekaURL, a.App, a.ID)
		if err != nil && strings.HasSuffix(err.Error(), ": 404") {
			return nil
		}
		last = err
		return fmt.Errorf("still there (%v)", err)
	})
	if !ok {
		t.Fatalf("%s: %s: %v\n%s", a.App, what, last, wire(tap, from))
	}
}

func nodeStatusIs(status string) func(instance) error {
	return func(i instance) error {
		if i.Status != status {
			return fmt.Errorf("status %s (overridden %s), want %s", i.Status, i.override(), status)
		}
		return nil
	}
}

// startPeeredPair starts two nodes made by newNode, each the other's
// static peer, and returns them once both answer /readyz.
func startPeeredPair(t *testing.T, newNode func(sets ...string) *interoptest.Node) []*interoptest.Node {
	t.Helper()
	ports := []int{interoptest.FreePort(t), interoptest.FreePort(t)}
	var nodes []*interoptest.Node
	for i := range ports {
		// The first node starts while its peer is still down: it serves at
		// once instead of waiting for a peer that knows the registry.
		n := newNode(fmt.Sprintf("eureka.client.service-url.defaultZone=http://127.0.0.1:%d/eureka/", ports[1-i]),
			"eureka.server.wait-time-in-ms-when-sync-empty=0", "muster.cold-start-wait-ms=0",
			"eureka.server.registry-sync-retries=1", "eureka.server.registry-sync-retry-wait-ms=200")
		n.Port = ports[i]
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		n.Start()
	}
	return nodes
}

// poll runs cond until it returns nil or the time is up.
func poll(timeout time.Duration, cond func() error) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// wire is what a failure names: the exchanges the client had through tap.
func wire(tap *interoptest.WireTap, from int) string {
	if tap == nil {
		return "(no wire tap on this connection)"
	}
	return "the client's exchanges through " + tap.URL() + " since the step began:\n" + tap.Dump(from)
}

// mustSee waits until tap recorded, since from, an exchange with this
// method whose path matches pathRe and whose status is one of statuses.
func mustSee(t *testing.T, tap *interoptest.WireTap, from int, method, pathRe string, statuses []int, what string) interoptest.Exchange {
	t.Helper()
	rx := regexp.MustCompile(pathRe)
	var hit interoptest.Exchange
	ok := poll(15*time.Second, func() error {
		for _, e := range tap.Since(from) {
			if e.Method != method || !rx.MatchString(e.Path) {
				continue
			}
			for _, s := range statuses {
				if e.Status == s {
					hit = e
					return nil
				}
			}
		}
		return fmt.Errorf("none")
	})
	if !ok {
		t.Fatalf("%s: no %s %s answered %v on the wire\n%s", what, method, pathRe, statuses, wire(tap, from))
	}
	return hit
}

// count is the number of exchanges since from with this method and a
// path matching pathRe.
func count(tap *interoptest.WireTap, from int, method, pathRe string) int {
	rx := regexp.MustCompile(pathRe)
	n := 0
	for _, e := range tap.Since(from) {
		if e.Method == method && rx.MatchString(e.Path) {
			n++
		}
	}
	return n
}

// evictions is the node's count of evicted leases (/admin/status).
func evictions(t *testing.T, n *interoptest.Node) uint64 {
	t.Helper()
	var st struct {
		Registry struct {
			Evictions uint64 `json:"evictions"`
		} `json:"registry"`
	}
	code, b, err := nodeCall(n, http.MethodGet, n.Base()+"/admin/status")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/admin/status: %d %v", code, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("/admin/status: %v", err)
	}
	return st.Registry.Evictions
}

// musterCmd runs the muster binary with args (its tls subcommands, say).
func musterCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(interoptest.Binary(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("muster %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// logWire logs, when the test ends, the kinds of exchange the client had
// through tap (method, path with the app and instance as {app} and {id},
// status, answer type and encoding), each with its count: the wire a
// scenario saw, in `go test -v` output, also when it passed.
func logWire(t *testing.T, tap *interoptest.WireTap, a func() *app) {
	t.Cleanup(func() {
		counts := map[string]int{}
		var order []string
		for _, e := range tap.Since(0) {
			p := e.Path
			if x := a(); x != nil {
				p = strings.ReplaceAll(strings.ReplaceAll(p, "/"+x.ID, "/{id}"), "/"+x.App, "/{app}")
			}
			k := fmt.Sprintf("%s %s -> %d %s %s", e.Method, p, e.Status, e.RespType, e.RespEnc)
			if counts[k] == 0 {
				order = append(order, k)
			}
			counts[k]++
		}
		var b strings.Builder
		for _, k := range order {
			fmt.Fprintf(&b, "\n  %4d × %s", counts[k], strings.TrimSpace(k))
		}
		t.Logf("wire through %s:%s", tap.URL(), b.String())
	})
}

// noErrors fails t if the client was ever refused, got a server error, or
// got gzip it did not ask for.
func noErrors(t *testing.T, tap *interoptest.WireTap, what string) {
	t.Helper()
	var bad bytes.Buffer
	for _, e := range tap.Since(0) {
		// A gzip answer to a client that did not ask for one is unreadable
		// to it (Spring's WebClient never decompresses on its own).
		if e.RespEnc == "gzip" && !strings.Contains(strings.ToLower(e.AcceptEncoding), "gzip") {
			fmt.Fprintln(&bad, "unasked gzip:", e.String())
		}
		if e.Status == http.StatusBadRequest || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status >= 500 && e.Status != http.StatusBadGateway {
			fmt.Fprintln(&bad, e.String())
		}
	}
	if bad.Len() > 0 {
		t.Fatalf("%s: answers a client must never get:\n%s\nall:\n%s", what, bad.String(), tap.Dump(0))
	}
}
