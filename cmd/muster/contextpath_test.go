package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hudl/fargo"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/node"
	"github.com/muster-registry/muster/settings"
)

// serveArgs starts a node from serve's command line (flags parsed by
// serve's own parser, settings loaded as serve loads them) on loopback.
func serveArgs(t *testing.T, name string, args ...string) *node.Node {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cf configFlags
	cf.register(fs)
	args = append(args, "--server.address=127.0.0.1", "--eureka.instance.hostname=127.0.0.1",
		"--eureka.instance.ip-address=127.0.0.1", "--cluster.bind-addr=127.0.0.1", "--cluster.bind-port=0",
		"--eureka.server.registry-sync-retry-wait-ms=200")
	if err := parseConfigArgs(fs, &cf, args); err != nil {
		t.Fatal(err)
	}
	s, _, err := settings.Load(cf.request(os.Environ()))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return startSettings(t, name, s)
}

// contextPathPair is a Spring peer pair as the guides write it, with the
// servlet context path every Spring server of the file serves under.
const contextPathPair = `spring:
  application:
    name: eureka-server
server:
  servlet:
    context-path: /register/
eureka:
  instance:
    hostname: 127.0.0.1
  client:
    register-with-eureka: true
    fetch-registry: true
  server:
    wait-time-in-ms-when-sync-empty: 0
cluster:
  enabled: false
---
spring:
  config:
    activate:
      on-profile: peer1
server:
  port: ${PORT1}
eureka:
  client:
    service-url:
      defaultZone: http://127.0.0.1:${PORT2}/register/eureka/
---
spring:
  config:
    activate:
      on-profile: peer2
server:
  port: ${PORT2}
eureka:
  client:
    service-url:
      defaultZone: http://127.0.0.1:${PORT1}/register/eureka/
`

// A Spring pair under server.servlet.context-path: clients (Muster's Go
// client, fargo) work at /register/eureka/, the two nodes replicate
// through the static peer URLs that carry the path, the dashboard,
// /lastn and the actuator moved, the probes answer at the root too, and
// the root's /eureka/ is gone as on a Spring server.
func TestServe_contextPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nodes")
	}
	p1, p2 := freeTCPPort(t), freeTCPPort(t)
	t.Setenv("PORT1", strconv.Itoa(p1))
	t.Setenv("PORT2", strconv.Itoa(p2))
	file := writeFile(t, "application.yml", contextPathPair)
	a := serveArgs(t, "peer1", "--config", file, "--profile", "peer1")
	b := serveArgs(t, "peer2", "--config", file, "--profile", "peer2")
	baseA, baseB := "http://127.0.0.1:"+strconv.Itoa(p1), "http://127.0.0.1:"+strconv.Itoa(p2)
	if want := baseA + "/register/eureka/"; a.URL() != want {
		t.Errorf("node URL %s, want %s", a.URL(), want)
	}

	for _, tc := range []struct {
		path string
		want int
	}{
		{"/register/eureka/apps", 200},
		{"/register/eureka/v2/apps", 200},
		{"/register/", 200},
		{"/register", 200},
		{"/register/lastn", 200},
		{"/register/actuator/health", 200},
		{"/register/admin/status", 200},
		{"/register/readyz", 200},
		{"/readyz", 200}, // the platform's probes stay at the root
		{"/livez", 200},
		{"/eureka/apps", 404},
		{"/", 404},
		{"/actuator/health", 404},
		{"/registerx/eureka/apps", 404},
	} {
		if code := getAs(t, baseA+tc.path, ""); code != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, code, tc.want)
		}
	}
	_, page, _ := httpGet(baseA + "/register/")
	if !strings.Contains(page, `href="/register/static/muster.css"`) || !strings.Contains(page, `href="/register/console/instances"`) ||
		strings.Contains(page, `href="/console`) {
		t.Errorf("dashboard links not under the context path:\n%.2000s", page)
	}

	// Muster's Go client at the moved URL of A.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Servers = []client.Server{{Zone: client.DefaultZone, URL: baseA + "/register/eureka/"}}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg, err := c.Register(ctx, client.Instance{App: "orders", HostName: "127.0.0.1", IPAddr: "127.0.0.1", Port: 8080})
	if err != nil {
		t.Fatalf("register through the context path: %v", err)
	}
	defer reg.Close()

	// fargo at the moved URL of B.
	conn := fargo.NewConn(baseB + "/register/eureka")
	ins := &fargo.Instance{HostName: "127.0.0.1", App: "BILLING", IPAddr: "127.0.0.1", VipAddress: "billing", Status: fargo.UP,
		Port: 9000, PortEnabled: true, DataCenterInfo: fargo.DataCenterInfo{Name: fargo.MyOwn},
		LeaseInfo: fargo.LeaseInfo{RenewalIntervalInSecs: 30, DurationInSecs: 90}}
	if err := conn.RegisterInstance(ins); err != nil {
		t.Fatalf("fargo register through the context path: %v", err)
	}

	// Each registration reaches the other node through the static peer
	// URL that carries the context path.
	cb := client.DefaultConfig()
	cb.Servers = []client.Server{{Zone: client.DefaultZone, URL: baseB + "/register/eureka/"}}
	clientB, err := client.New(cb)
	if err != nil {
		t.Fatal(err)
	}
	defer clientB.Close()
	testwait.True(t, 20*time.Second, "ORDERS replicated from A to B", func() bool {
		apps, err := clientB.Fetch(ctx)
		return err == nil && len(apps["ORDERS"]) == 1
	})
	testwait.True(t, 20*time.Second, "BILLING replicated from B to A", func() bool {
		connA := fargo.NewConn(baseA + "/register/eureka")
		app, err := connA.GetApp("BILLING")
		return err == nil && len(app.Instances) == 1
	})

	// The nodes' own registrations advertise URLs under the path.
	var self struct {
		Application struct {
			Instance []struct {
				HostName       string `json:"hostName"`
				HomePageURL    string `json:"homePageUrl"`
				StatusPageURL  string `json:"statusPageUrl"`
				HealthCheckURL string `json:"healthCheckUrl"`
			} `json:"instance"`
		} `json:"application"`
	}
	testwait.True(t, 20*time.Second, "both nodes' self-registrations on A", func() bool {
		req, _ := http.NewRequest(http.MethodGet, baseA+"/register/eureka/apps/EUREKA-SERVER", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&self) == nil && len(self.Application.Instance) == 2
	})
	for _, in := range self.Application.Instance {
		for _, u := range []string{in.HomePageURL, in.StatusPageURL, in.HealthCheckURL} {
			if !strings.Contains(u, "/register/") {
				t.Errorf("self-registration URL %q is not under the context path", u)
			}
			if code := getAs(t, u, ""); code != 200 {
				t.Errorf("GET %s (a self-registration URL): %d", u, code)
			}
		}
	}
	_ = b
}

// server.context-path is Spring Boot 1.x's name of the same setting; a
// path without its leading / is refused at load, naming the key.
func TestConfigCheck_contextPath(t *testing.T) {
	s := mustLoad(t, "", nil, []string{"server.context-path=/eureka-server/"})
	if got := s.ContextPath(); got != "/eureka-server" {
		t.Errorf("server.context-path: %q, want /eureka-server", got)
	}
	if _, _, err := settings.LoadSettings("", nil, []string{"server.servlet.context-path=register"}); err == nil ||
		!strings.Contains(err.Error(), "server.servlet.context-path") {
		t.Errorf("a path without / : %v", err)
	}
}

// muster status and members find /admin/status under a context path when
// given the node's service URL or its base URL with the path.
func TestStatusURL_contextPath(t *testing.T) {
	for raw, want := range map[string]string{
		"http://h:8761/register/eureka/":     "http://h:8761/register/admin/status",
		"http://h:8761/register/eureka/v2":   "http://h:8761/register/admin/status",
		"http://h:8761/register":             "http://h:8761/register/admin/status",
		"h:8761/register/admin/status":       "http://h:8761/register/admin/status",
		"http://h:8761/eureka/":              "http://h:8761/admin/status",
		"h:8761":                             "http://h:8761/admin/status",
		"https://u:p@h:8761/register/eureka": "https://u:p@h:8761/register/admin/status",
	} {
		u, err := statusURL(raw, "http")
		if err != nil || u.String() != want {
			t.Errorf("statusURL(%q) = %v, %v; want %s", raw, u, err, want)
		}
	}
}
