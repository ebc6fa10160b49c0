package springserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

// serverSource is the Spring Cloud Eureka Server app, relative to the
// repository root.
const serverSource = "interop/spring/eureka-server"

// springJar builds the Spring server app (once per machine and source
// content) and returns its jar, or skips the test saying why it cannot.
func springJar(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("SKIP the Spring Cloud Eureka Server tests: no java on PATH (scripts/test.sh installs a JDK as root)")
	}
	dir := interoptest.Built(t, interoptest.Source(t, serverSource))
	return filepath.Join(dir, "target", "eureka-server.jar")
}

// springServer is one Spring Cloud Eureka Server process on a fixed
// loopback port, with Spring's URL layout (http://127.0.0.1:PORT/eureka/).
// Its read-only response cache refreshes every second (30 s by default),
// so that a read shows a change without the tests waiting half a minute;
// everything else is the server's defaults unless a test adds settings.
type springServer struct {
	t     *testing.T
	jar   string
	port  int
	peers []string // static peers' Eureka URLs: eureka.client.service-url.defaultZone
	extra []string // more --key=value settings
	tmp   string
	proc  *interoptest.Process
}

func newSpringServer(t *testing.T, jar string, extra ...string) *springServer {
	return &springServer{t: t, jar: jar, port: interoptest.FreePort(t), extra: extra, tmp: t.TempDir()}
}

func (s *springServer) url() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) + "/eureka/" }

// springJVM is the JVM the tests give each Spring server: small, since
// several run side by side on a two-core machine.
var springJVM = []string{"-Xmx256m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=64m"}

// springArgs is the command line of a Spring server on port with the
// given static peers: what a team's peer-aware application.yml says, as
// --key=value settings.
func springArgs(jar string, port int, peers []string, extra ...string) []string {
	self := "http://127.0.0.1:" + strconv.Itoa(port) + "/eureka/"
	args := []string{"-jar", jar,
		"--server.port=" + strconv.Itoa(port),
		"--server.address=127.0.0.1",
		"--eureka.instance.hostname=127.0.0.1",
		// Every peer shares the host name 127.0.0.1: without its own URL
		// the server would drop every peer as itself (isThisMyUrl
		// compares host names).
		"--eureka.server.my-url=" + self,
		"--logging.level.root=WARN",
		"--logging.level.com.netflix.eureka.registry=INFO",
		"--logging.level.org.springframework.boot.tomcat=INFO", // "Tomcat started on port N"
	}
	if len(peers) > 0 {
		// A peer-aware server: its embedded client fetches the peers'
		// registry, which syncUp copies at start. Spring's default of
		// eureka.server.registry-sync-retries is 0, which skips syncUp.
		args = append(args,
			"--eureka.client.service-url.defaultZone="+strings.Join(peers, ","),
			"--eureka.client.fetch-registry=true",
			"--eureka.client.registry-fetch-interval-seconds=5",
			"--eureka.server.registry-sync-retries=3",
			"--eureka.server.registry-sync-retry-wait-ms=2000",
			"--eureka.server.wait-time-in-ms-when-sync-empty=0",
		)
	}
	return append(args, extra...)
}

// launch starts the JVM without waiting for it to answer, so that several
// servers can boot side by side; ready waits.
func (s *springServer) launch() *springServer {
	args := append([]string{"-Djava.io.tmpdir=" + s.tmp}, springJVM...)
	args = append(args, springArgs(s.jar, s.port, s.peers,
		append([]string{"--eureka.server.response-cache-update-interval-ms=1000"}, s.extra...)...)...)
	s.proc = interoptest.Start(s.t, "spring eureka server :"+strconv.Itoa(s.port), exec.Command("java", args...))
	return s
}

func (s *springServer) ready() *springServer {
	s.t.Helper()
	interoptest.WaitReady(s.t, s.proc, "the Spring Eureka server on port "+strconv.Itoa(s.port), 120*time.Second, "the Spring Eureka server on "+s.url()+" answers GET apps", func() error {
		// Its own Tomcat on the port first: on a shared machine another
		// process may have taken the port since it was found free.
		if len(s.proc.Out.Match(0, `Tomcat started on port `+strconv.Itoa(s.port)+` `)) == 0 {
			return fmt.Errorf("its Tomcat has not said it listens on %d yet", s.port)
		}
		return interoptest.StatusOK(http.Get(s.url() + "apps"))
	})
	return s
}

func (s *springServer) start() *springServer { return s.launch().ready() }

func (s *springServer) stop() {
	if s.proc != nil {
		s.proc.Stop()
		s.proc = nil
	}
}

// goClient is one service instance kept registered by the Go client
// package (register, a heartbeat every second, re-registration after a
// 404, cancel on Close) against the given servers, in order. Its lease is
// Eureka's default 90 s.
type goClient struct {
	t    *testing.T
	c    *client.Client
	reg  *client.Registration
	app  string
	id   string
	port int
}

func startClient(t *testing.T, app string, servers ...string) *goClient {
	t.Helper()
	// The port is data only: the instance's port in its registration.
	return startClientPort(t, app, interoptest.FreePort(t), servers...)
}

// startClientPort is startClient for the instance with the given port:
// the same port is the same instance id (host:app:port).
func startClientPort(t *testing.T, app string, port int, servers ...string) *goClient {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Servers = nil
	for _, s := range servers {
		cfg.Servers = append(cfg.Servers, client.Server{Zone: client.DefaultZone, URL: s})
	}
	cfg.RetryBackoff, cfg.MaxRetryBackoff = 200*time.Millisecond, 2*time.Second
	cfg.ZoneRetryInterval = 0
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := c.Register(ctx, client.Instance{App: app, HostName: "127.0.0.1", IPAddr: "127.0.0.1", Port: port,
		RenewalInterval: time.Second, LeaseDuration: client.DefaultLeaseDuration})
	if err != nil {
		t.Fatalf("register %s on %v: %v", app, servers, err)
	}
	g := &goClient{t: t, c: c, reg: reg, app: reg.Instance().App, id: reg.Instance().ID, port: port}
	t.Cleanup(func() { _ = c.Close() })
	return g
}

// setMetadata registers the instance again with metadata key=value and a
// newer lastDirtyTimestamp, as a Java client does when its metadata
// changes (ApplicationInfoManager.registerAppMetadata).
func (g *goClient) setMetadata(key, value string) {
	g.t.Helper()
	in := g.reg.Instance()
	if in.Metadata == nil {
		in.Metadata = map[string]string{}
	}
	in.Metadata[key] = value
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.c.RegisterOnce(ctx, in, time.Now()); err != nil {
		g.t.Fatalf("%s: register with metadata %s=%s: %v", g.id, key, value, err)
	}
}

// sees waits until the client's own fetch (full, then deltas with the
// hashcode check) shows app/id with the given status.
func (g *goClient) sees(app, id, status string) {
	g.t.Helper()
	testwait.For(g.t, 30*time.Second, "the client "+g.id+" fetches "+app+"/"+id+" as "+status, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		apps, err := g.c.Fetch(ctx)
		if err != nil {
			return err
		}
		for _, in := range apps[strings.ToUpper(app)] {
			if in.ID == id {
				if string(in.Status) != status {
					return fmt.Errorf("status %s", in.Status)
				}
				return nil
			}
		}
		return fmt.Errorf("not in its registry (%d apps)", len(apps))
	})
}

// instance is the part of a Eureka instance document the tests read.
type instance struct {
	Status           string            `json:"status"`
	OverriddenStatus string            `json:"overriddenStatus"`
	Overriddenstatus string            `json:"overriddenstatus"` // the Java server's legacy spelling
	Metadata         map[string]string `json:"metadata"`
	LeaseInfo        struct {
		LastRenewalTimestamp int64 `json:"lastRenewalTimestamp"`
	} `json:"leaseInfo"`
}

func (i instance) overridden() string {
	if i.OverriddenStatus != "" {
		return i.OverriddenStatus
	}
	return i.Overriddenstatus
}

// getInstance reads GET base/apps/APP/ID as JSON: the instance, or an
// error that says what the server answered.
func getInstance(c *http.Client, base, app, id string) (instance, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, _ := http.NewRequest(http.MethodGet, base+"apps/"+app+"/"+id, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return instance{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return instance{}, fmt.Errorf("GET %sapps/%s/%s: %d %s", base, app, id, resp.StatusCode, interoptest.Tail(string(b), 200))
	}
	var doc struct {
		Instance instance `json:"instance"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return instance{}, fmt.Errorf("GET %sapps/%s/%s: %v: %s", base, app, id, err, interoptest.Tail(string(b), 200))
	}
	return doc.Instance, nil
}

// waitInstance waits until base has the instance and check accepts it.
func waitInstance(t *testing.T, base, app, id, what string, check func(instance) error) instance {
	t.Helper()
	var got instance
	testwait.For(t, 30*time.Second, what, func() error {
		i, err := getInstance(nil, base, app, id)
		if err != nil {
			return err
		}
		if check != nil {
			if err := check(i); err != nil {
				return err
			}
		}
		got = i
		return nil
	})
	return got
}

// waitGone waits until base answers 404 for the instance.
func waitGone(t *testing.T, base, app, id, what string) {
	t.Helper()
	testwait.For(t, 30*time.Second, what, func() error {
		_, err := getInstance(nil, base, app, id)
		if err == nil {
			return fmt.Errorf("still there")
		}
		if !strings.Contains(err.Error(), ": 404") {
			return err
		}
		return nil
	})
}

func statusIs(want string) func(instance) error {
	return func(i instance) error {
		if i.Status != want {
			return fmt.Errorf("status %s (overridden %s), want %s", i.Status, i.overridden(), want)
		}
		return nil
	}
}

func hasMeta(key, want string) func(instance) error {
	return func(i instance) error {
		if i.Metadata[key] != want {
			return fmt.Errorf("metadata %s=%q, want %q", key, i.Metadata[key], want)
		}
		return nil
	}
}

// send makes one request and returns its status.
func send(t *testing.T, method, url string, header ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// registerDirect registers an instance with a 10-minute lease as a peer
// would (X-Netflix-Discovery-Replication), so the server keeps it to
// itself.
func registerDirect(t *testing.T, base, app, id string) {
	t.Helper()
	registerCopy(t, base, app, id, 0, 8080, "")
}

// registerCopy is registerDirect with the instance's port, a
// lastDirtyTimestamp (0: none, the server stamps its own) and metadata
// phase=phase (none if empty): a peer's copy of an instance.
func registerCopy(t *testing.T, base, app, id string, lastDirty int64, port int, phase string) {
	t.Helper()
	extra := ""
	if lastDirty != 0 {
		extra += fmt.Sprintf(`,"lastDirtyTimestamp":"%d"`, lastDirty)
	}
	if phase != "" {
		extra += fmt.Sprintf(`,"metadata":{"phase":%q}`, phase)
	}
	body := fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"127.0.0.1","app":%q,"ipAddr":"127.0.0.1","status":"UP",`+
		`"port":{"$":%d,"@enabled":"true"},"vipAddress":%q,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":600}%s}}`, id, app, port, strings.ToLower(app), extra)
	req, _ := http.NewRequest(http.MethodPost, base+"apps/"+app, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Netflix-Discovery-Replication", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("register %s on %s: %d", app, base, resp.StatusCode)
	}
}

// nodeStatus is the part of a Muster node's /admin/status the tests read.
type nodeStatus struct {
	SelfPreservation struct {
		Active bool `json:"active"`
	} `json:"selfPreservation"`
	Peers []struct {
		URL         string `json:"url"`
		State       string `json:"state"`
		AntiEntropy string `json:"antiEntropy"`
		LastError   string `json:"lastError"`
	} `json:"peers"`
}

func adminStatus(t *testing.T, n *interoptest.Node) nodeStatus {
	t.Helper()
	resp, err := n.HTTP.Get(n.Base() + "/admin/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/admin/status: %d", resp.StatusCode)
	}
	var st nodeStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/admin/status: %v", err)
	}
	return st
}

// pollClient is the HTTP client of the tests' background polls: a short
// timeout, so a server being stopped does not hold a poll.
var pollClient = &http.Client{Timeout: 2 * time.Second}

// appsHashcode is the apps__hashcode of base's full registry (JSON).
func appsHashcode(base string) (string, error) {
	req, _ := http.NewRequest(http.MethodGet, base+"apps", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := pollClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Applications struct {
			Hashcode string `json:"apps__hashcode"`
		} `json:"applications"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return "", err
	}
	return doc.Applications.Hashcode, nil
}
