package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/rs/zerolog"
)

const (
	testAdminPW  = "admin-secret-pw"
	testWriterPW = "writer-secret-pw"
	testSecret   = "cluster-peer-secret-0123456789"
)

// startLoggedNode is startTestNode with the log also written to sink.
func startLoggedNode(t *testing.T, name string, join []string, sink io.Writer, sets ...string) *Node {
	t.Helper()
	base := []string{
		"eureka.client.register-with-eureka=false", // tests count the instances they register
		"server.port=0", "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1", "cluster.bind-port=0",
		"eureka.server.registry-sync-retry-wait-ms=200", "eureka.server.registry-sync-retries=2",
	}
	if len(join) > 0 {
		base = append(base, "cluster.join="+strings.Join(join, ","))
	}
	s := mustLoad(t, "", nil, append(base, sets...))
	logger := zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), sink)).Level(zerolog.InfoLevel).With().Str("node", name).Logger()
	n, err := New(s, logger, Options{Memberlist: memberlist.DefaultLocalConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	return n
}

func securedSets(secret string) []string {
	return []string{
		"spring.security.user.name=admin", "spring.security.user.password=" + testAdminPW,
		"muster.auth.users.writer.password=" + testWriterPW, "muster.auth.users.writer.role=write",
		"cluster.peer-secret=" + secret,
	}
}

// authCall is an HTTP request with Basic credentials (none when user is
// empty); it answers the status code.
func authCall(t *testing.T, user, pw, method, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pw)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// authMetric reads one sample of /metrics with admin credentials.
func authMetric(t *testing.T, n *Node, sample string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.Addr()+"/metrics", nil)
	req.SetBasicAuth("admin", testAdminPW)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics with admin credentials: %d", resp.StatusCode)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// Two nodes with the same peer secret and auth on: client writes need
// credentials, replication and syncUp are signed and go through, the
// probes stay open.
func TestSecuredCluster_twoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	var logs testlog.Buffer
	n1 := startLoggedNode(t, "s1", nil, &logs, securedSets(testSecret)...)
	waitOpened(t, n1)
	if code := call(t, "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-anon", 90)); code != 401 {
		t.Fatalf("register without credentials = %d, want 401", code)
	}
	if code := authCall(t, "writer", "wrong", "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-bad", 90)); code != 401 {
		t.Fatalf("register with a wrong password = %d, want 401", code)
	}
	for i := 0; i < 5; i++ {
		if code := authCall(t, "writer", testWriterPW, "POST", n1.URL()+"apps/ORDERS", instanceBody("ORDERS", fmt.Sprintf("o-%d", i), 90)); code != 204 {
			t.Fatalf("register = %d", code)
		}
	}
	// The second node copies the registry at start-up with a signed fetch.
	n2 := startLoggedNode(t, "s2", []string{n1.gossipAddr(t)}, &logs, securedSets(testSecret)...)
	waitOpened(t, n2)
	if n2.syncResult.Instances != 5 {
		t.Fatalf("syncUp copied %d instances, want 5 (result %+v)", n2.syncResult.Instances, n2.syncResult)
	}
	if code := authCall(t, "writer", testWriterPW, "POST", n2.URL()+"apps/BILLING", instanceBody("BILLING", "b-1", 90)); code != 204 {
		t.Fatalf("register on node 2 = %d", code)
	}
	if code := authCall(t, "writer", testWriterPW, "DELETE", n1.URL()+"apps/ORDERS/o-0", ""); code != 200 {
		t.Fatalf("cancel on node 1 = %d", code)
	}
	waitFor(t, 10*time.Second, "replication both ways", func() bool {
		_, b1 := n1.reg.Instance("BILLING", "b-1")
		_, o0 := n2.reg.Instance("ORDERS", "o-0")
		return b1 && !o0 && n2.reg.Len() == 5
	})
	for _, n := range []*Node{n1, n2} {
		if code, _, _ := httpGet("http://" + n.Addr() + "/readyz"); code != 200 {
			t.Errorf("/readyz without credentials = %d", code)
		}
		if v := authMetric(t, n, `muster_auth_failures_total{reason="peer_bad_signature"}`); v != 0 {
			t.Errorf("node %s refused %v peer batches between nodes with the same secret", n.name, v)
		}
	}
	// The admin role is needed for /admin/status (muster status reads it;
	// cmd/muster tests the credentials in its --url).
	body := adminStatusAs(t, "admin", testAdminPW, n1.Addr(), http.StatusOK)
	if !strings.Contains(body, `"auth": true`) || !strings.Contains(body, `"peerAuth": true`) {
		t.Errorf("/admin/status security of a secured node:\n%s", body)
	}
	if body := adminStatusAs(t, "writer", testWriterPW, n1.Addr(), http.StatusForbidden); strings.Contains(body, testWriterPW) {
		t.Errorf("/admin/status as a write user shows the password: %s", body)
	}
	for _, secret := range []string{testAdminPW, testWriterPW, testSecret} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log holds a secret (%s…)", secret[:4])
		}
	}
}

// Three nodes gossip together, but the third has the wrong peer secret:
// nothing written on it reaches the other two, nothing of theirs reaches
// it, and the two show it in their metrics and logs.
func TestSecuredCluster_wrongSecretCannotWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	var goodLogs, badLogs testlog.Buffer
	n1 := startLoggedNode(t, "g1", nil, &goodLogs, securedSets(testSecret)...)
	seed := n1.gossipAddr(t)
	n2 := startLoggedNode(t, "g2", []string{seed}, &goodLogs, securedSets(testSecret)...)
	evil := startLoggedNode(t, "evil", []string{seed}, &badLogs, securedSets("a-different-secret-0123456789")...)
	nodes := []*Node{n1, n2, evil}
	waitOpened(t, nodes...)
	waitFor(t, 15*time.Second, "every node to see two peers", func() bool {
		for _, n := range nodes {
			if len(n.currentPeers()) != 2 {
				return false
			}
		}
		return true
	})
	if code := authCall(t, "writer", testWriterPW, "POST", n1.URL()+"apps/GOOD", instanceBody("GOOD", "g-1", 90)); code != 204 {
		t.Fatalf("register on g1 = %d", code)
	}
	if code := authCall(t, "writer", testWriterPW, "POST", evil.URL()+"apps/EVIL", instanceBody("EVIL", "e-1", 90)); code != 204 {
		t.Fatalf("register on evil = %d", code)
	}
	waitFor(t, 10*time.Second, "g2 to get g1's change and both good nodes to refuse evil's batch", func() bool {
		_, good := n2.reg.Instance("GOOD", "g-1")
		return good &&
			authMetric(t, n1, `muster_auth_failures_total{reason="peer_bad_signature"}`) >= 1 &&
			authMetric(t, n2, `muster_auth_failures_total{reason="peer_bad_signature"}`) >= 1
	})
	// Both good nodes have refused evil's batch (a refusal is final: the
	// sender drops it); evil has refused g1's. Nothing crossed.
	waitFor(t, 10*time.Second, "evil to refuse a good node's batch", func() bool {
		return authMetric(t, evil, `muster_auth_failures_total{reason="peer_bad_signature"}`) >= 1
	})
	for _, n := range []*Node{n1, n2} {
		if _, ok := n.reg.Instance("EVIL", "e-1"); ok {
			t.Errorf("%s holds EVIL/e-1 from the node with the wrong secret", n.name)
		}
	}
	if _, ok := evil.reg.Instance("GOOD", "g-1"); ok {
		t.Error("the node with the wrong secret got g1's change")
	}
	if out := goodLogs.String(); !strings.Contains(out, "refused peer request") || !strings.Contains(out, `"claimed_node":"evil"`) {
		t.Errorf("good nodes did not log the refused peer:\n%s", out)
	}
	for _, s := range []string{testSecret, "a-different-secret", testAdminPW, testWriterPW} {
		if strings.Contains(goodLogs.String()+badLogs.String(), s) {
			t.Errorf("log holds a secret (%s…)", s[:4])
		}
	}
	// The refusals changed nothing and the good nodes kept serving.
	if code := authCall(t, "admin", testAdminPW, "GET", n1.URL()+"apps/GOOD", ""); code != 200 {
		t.Errorf("g1 after the refusals: GET app = %d", code)
	}
}

// A static peer (a Java Eureka server, say) authenticates with the
// credentials in its service URL, as Spring peers do; they go to that URL
// only: not to another static peer, not across a redirect, not into logs
// or /admin/status.
func TestStaticPeer_credentialsInURL(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	var logs testlog.Buffer
	// The target: auth on, no cluster, so no peer secret; batches need an
	// admin (the Spring way).
	target := startLoggedNode(t, "target", nil, &logs, "spring.security.user.name=admin", "spring.security.user.password="+testAdminPW, "cluster.enabled=false")
	waitOpened(t, target)

	var leaked, redirected atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) }))
	t.Cleanup(elsewhere.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(other.Close)

	u, _ := url.Parse(target.URL())
	u.User = url.UserPassword("admin", testAdminPW)
	src := startLoggedNode(t, "source", nil, &logs, "cluster.enabled=false",
		"eureka.client.service-url.defaultZone="+u.String()+","+other.URL+"/eureka/")
	waitOpened(t, src)
	if code := call(t, "POST", src.URL()+"apps/ORDERS", instanceBody("ORDERS", "o-1", 90)); code != 204 {
		t.Fatalf("register on source = %d", code)
	}
	waitFor(t, 10*time.Second, "replication to the static peer with credentials", func() bool {
		_, ok := target.reg.Instance("ORDERS", "o-1")
		return ok
	})
	if leaked.Load() != 0 {
		t.Errorf("the other static peer got an Authorization header %d times", leaked.Load())
	}
	if redirected.Load() != 0 {
		t.Errorf("a redirect was followed %d times", redirected.Load())
	}
	_, status, err := httpGet("http://" + src.Addr() + "/admin/status")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(status, testAdminPW) || !strings.Contains(status, "admin:xxxxx@") {
		t.Errorf("/admin/status shows the peer URL unredacted or not at all:\n%s", status)
	}
	_, dash, _ := httpGet("http://" + src.Addr() + "/")
	if strings.Contains(dash, testAdminPW) {
		t.Error("the dashboard shows the static peer's password")
	}
	if strings.Contains(logs.String(), testAdminPW) {
		t.Errorf("the log holds the static peer's password:\n%s", logs.String())
	}
}

// Start-up says so, once, when the node is open beyond loopback. The
// beyond-loopback cases call warnIfOpen with the address the listener
// would have, so the test binds nothing but loopback.
func TestWarnIfOpen(t *testing.T) {
	every := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8761}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8761}
	for _, tc := range []struct {
		name string
		addr net.Addr
		sets []string
		want []string
	}{
		{"loopback only", lo, []string{"cluster.bind-addr=127.0.0.1"}, nil},
		{"http on every interface", every, []string{"cluster.bind-addr=127.0.0.1"}, []string{"the HTTP API listens on [::]:8761 with no authentication"}},
		{"gossip on every interface", lo, nil, []string{"the cluster gossips on 0.0.0.0 with no key"}},
		{"both, one warning", every, nil, []string{"the HTTP API listens", "the cluster gossips"}},
		{"gossip off", lo, []string{"cluster.enabled=false"}, nil},
		{"secured", every, append([]string{"cluster.secret-key=MDEyMzQ1Njc4OWFiY2RlZg=="}, securedSets(testSecret)...), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testlog.Buffer
			s := mustLoad(t, "", nil, tc.sets)
			sec, err := newNodeSecurity(s)
			if err != nil {
				t.Fatal(err)
			}
			warnIfOpen(zerolog.New(&logs), s, s.ClusterEnabled, tc.addr, sec.report(s))
			out := logs.String()
			warnings := strings.Count(out, "this registry is open to anyone who can reach it")
			if len(tc.want) == 0 {
				if warnings != 0 {
					t.Fatalf("warned on a closed node:\n%s", out)
				}
				return
			}
			if warnings != 1 {
				t.Fatalf("%d open warnings, want 1:\n%s", warnings, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("warning lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A real node on loopback starts without the warning.
func TestNode_noOpenWarningOnLoopback(t *testing.T) {
	var logs testlog.Buffer
	n := startLoggedNode(t, "quiet", nil, &logs)
	waitOpened(t, n)
	if strings.Contains(logs.String(), "this registry is open") {
		t.Errorf("warned on a loopback node:\n%s", logs.String())
	}
}

// adminStatusAs GETs /admin/status with basic credentials and wants code.
func adminStatusAs(t *testing.T, user, pw, addr string, code int) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/admin/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		t.Fatalf("/admin/status as %s = %d, want %d: %s", user, resp.StatusCode, code, b)
	}
	return string(b)
}
