package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/dns"
	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
)

const (
	dashboardFile  = "grafana/muster-dashboard.json"
	alertsFile     = "prometheus/alerts.yml"
	alertTestsFile = "prometheus/alerts_test.yml"
)

// upcoming are metrics the dashboard and the rules already use before a
// node exports them. They must be used, and may be absent from /metrics
// until then. None at the moment.
var upcoming = []string{}

// metricName finds the metric names in a PromQL expression: ours and the Go
// client's runtime and process collectors. Prometheus' own series (up) are
// not scraped and so not checked.
var metricName = regexp.MustCompile(`\b(?:muster|go|process)_[a-zA-Z0-9_]+\b`)

// stubReplication stands in for the replicator so the per-peer series
// exist; the collector that names them is the real one.
type stubReplication struct{}

func (stubReplication) Peers() []replication.PeerStats {
	return []replication.PeerStats{{Name: "peer-b", URL: "http://127.0.0.1:1/eureka/", Zone: "b", QueueDepth: 3, LastBatchMillis: 12}}
}
func (stubReplication) Totals() replication.Counters {
	return replication.Counters{ItemsSent: 10, BatchesSent: 2}
}

// stubAntiEntropy stands in for anti-entropy so its per-peer series exist.
type stubAntiEntropy struct{}

func (stubAntiEntropy) Stats() []replication.AntiEntropyStats {
	return []replication.AntiEntropyStats{{Peer: "peer-b", InSync: false, Divergent: 2, Last: time.Unix(1700000000, 0), RoundsOK: 3, RoundsFailed: 1}}
}
func (stubAntiEntropy) Totals() replication.Repairs { return replication.Repairs{Missing: 1} }

// scrapeNode starts the HTTP API of a node in-process, serves one request
// of each kind so the request histogram has series, and returns the metric
// names of its /metrics.
func scrapeNode(t *testing.T) map[string]bool {
	t.Helper()
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	rcfg := registry.DefaultConfig()
	rcfg.Logger = logger
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg.OpenForTraffic()
	hcfg := httpapi.DefaultConfig()
	hcfg.Registry = reg
	hcfg.Logger = logger
	hcfg.Replication = stubReplication{}
	hcfg.AntiEntropy = stubAntiEntropy{}
	// A peer secret makes the node export muster_auth_failures_total (its
	// peer reasons start at 0) while client routes stay open.
	if hcfg.PeerVerifier, err = auth.NewPeerVerifier("deploy-test-peer-secret", 0, 0); err != nil {
		t.Fatal(err)
	}
	hcfg.Peers = func() []httpapi.PeerInfo {
		return []httpapi.PeerInfo{{Name: "peer-b", Zone: "b", URL: "http://127.0.0.1:1/eureka/", State: "alive"}}
	}
	// The node's DNS interface registers on the same registry, as the
	// node wiring does; one refused query gives its labelled series.
	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hcfg.Metrics, hcfg.Gatherer = metrics, metrics
	dcfg := dns.DefaultConfig()
	dcfg.Addr = "127.0.0.1:0"
	ds, err := dns.New(dcfg, dns.Options{Registry: reg, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Start(); err != nil {
		t.Fatal(err)
	}
	defer ds.Shutdown()
	q := new(mdns.Msg)
	q.SetQuestion("example.com.", mdns.TypeA)
	if _, _, err := (&mdns.Client{Timeout: 2 * time.Second}).Exchange(q, ds.Addr().String()); err != nil {
		t.Fatal(err)
	}
	// The health checks register on it too; one round over an instance
	// whose port is closed sets off the guard (its app's only instance
	// fails), which gives the per-app guard series.
	hc := healthcheck.DefaultConfig()
	hc.Enabled, hc.Apps, hc.Logger = true, []string{"*"}, logger
	hc.AllowedCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	checker, err := healthcheck.New(hc, healthcheck.Options{Registry: reg, Self: "a", Members: func() []string { return []string{"a"} }, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	if _, err := reg.Apply(registry.RegisterOp(&registry.Instance{InstanceID: "i-1", HostName: "127.0.0.1", App: "PROBED", IPAddr: "127.0.0.1",
		Status: registry.StatusUp, Port: registry.Port{Number: closedPort, Enabled: true}, DataCenterInfo: registry.DataCenterInfo{Name: "MyOwn"}})); err != nil {
		t.Fatal(err)
	}
	if res := checker.Round(context.Background()); len(res.Guarded) != 1 {
		t.Fatalf("health-check round: %+v, want PROBED guarded", res)
	}
	srv, err := httpapi.New(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	get("/eureka/apps")
	get("/eureka/apps/NOPE/nope") // a 404 too
	body := get("/metrics")
	names := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		names[name] = true
	}
	if !names["muster_instances"] || !names["muster_http_request_duration_seconds_bucket"] {
		t.Fatalf("/metrics does not look like a Muster node's:\n%.2000s", body)
	}
	return names
}

// dashboardExprs returns every PromQL expression of the dashboard: panel
// targets and templating queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no uid or no panels", dashboardFile)
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the dashboard's data source variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		exprs = append(exprs, v.Definition)
	}
	return exprs
}

// ruleExprs returns the expressions of alerts.yml.
func ruleExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var exprs []string
	groups, _ := doc["groups"].([]any)
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if e, ok := r.(map[string]any)["expr"].(string); ok {
				exprs = append(exprs, e)
			}
		}
	}
	if len(exprs) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return exprs
}

func usedMetrics(exprs []string) map[string]bool {
	used := map[string]bool{}
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			used[m] = true
		}
	}
	return used
}

// TestDashboardAndRules_useExportedMetrics: every metric the dashboard and
// the alert rules query is one a node exports, apart from the announced
// anti-entropy ones, which both must already use.
func TestDashboardAndRules_useExportedMetrics(t *testing.T) {
	exported := scrapeNode(t)
	for file, exprs := range map[string][]string{dashboardFile: dashboardExprs(t), alertsFile: ruleExprs(t)} {
		used := usedMetrics(exprs)
		for _, m := range sortedKeys(used) {
			if !exported[m] && !slices.Contains(upcoming, m) {
				t.Errorf("%s uses %s, which /metrics does not export", file, m)
			}
		}
		for _, m := range upcoming {
			if !used[m] {
				t.Errorf("%s does not use the upcoming anti-entropy metric %s", file, m)
			}
		}
	}
}

// TestDashboard_coversEveryMusterMetric: a metric a node exports but no
// panel shows is a metric an operator never sees.
func TestDashboard_coversEveryMusterMetric(t *testing.T) {
	exported := scrapeNode(t)
	used := usedMetrics(dashboardExprs(t))
	for _, m := range sortedKeys(exported) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(m, "muster_") && !used[m] && !used[base+"_bucket"] && !used[base+"_count"] {
			t.Errorf("the dashboard shows no panel of %s", m)
		}
	}
}

func TestAlertRules_promtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus; scripts/test.sh installs it when it can): alert rules not checked")
	}
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertTestsFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
