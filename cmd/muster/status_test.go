package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/replication"
)

// TestStatusAndMembers_twoNodes runs both commands against two real nodes
// joined over memberlist, with an instance registered on one of them.
func TestStatusAndMembers_twoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node test")
	}
	n1 := startNode(t, "alpha", "cluster.zone=zone-a")
	n2 := startNode(t, "beta", "cluster.zone=zone-b", "cluster.join="+n1.GossipAddr())
	waitFor(t, 15*time.Second, "the nodes to see each other", func() bool {
		return len(n1.Peers()) == 1 && len(n2.Peers()) == 1
	})
	register(t, n1, "ORDERS", "orders-1")

	var out, errOut bytes.Buffer
	// A Eureka service URL works as well as a base URL.
	if code := run([]string{"status", "--url", "http://" + n1.Addr() + "/eureka/"}, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut.String())
	}
	status := out.String()
	for _, want := range []string{
		`(?m)^Node\s+alpha \(zone zone-a\), version dev, up \d+s$`,
		`(?m)^URL\s+http://127\.0\.0\.1:\d+/eureka/$`,
		`(?m)^Traffic\s+open: synced, serving clients$`,
		`(?m)^Registry\s+1 app, 1 instance \(version \d+, apps hashcode UP_1_\)$`,
		`(?m)^\s+since start: 1 registrations, 0 renewals, 0 cancels, 0 evictions$`,
		`(?m)^Self-preservation\s+\S`,
		`(?m)^\s+renewals last minute \d+, threshold \d+, expected \d+/min`,
		`(?m)^Peers\s+1: 1 alive \(muster members lists them\)$`,
		`(?m)^Anti-entropy\s+1 (in sync|pending|not in sync)$`,
	} {
		if !regexp.MustCompile(want).MatchString(status) {
			t.Errorf("status output lacks %s:\n%s", want, status)
		}
	}

	out.Reset()
	if code := run([]string{"members", "--url", n2.Addr()}, &out, &errOut); code != 0 {
		t.Fatalf("members: exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("members: want a header, self and one peer:\n%s", out.String())
	}
	for i, want := range []string{
		`^NAME\s+ZONE\s+STATE\s+QUEUE\s+LAST BATCH\s+IN SYNC\s+URL\s+LAST ERROR$`,
		`^beta\s+zone-b\s+self\s+-\s+-\s+-\s+http://127\.0\.0\.1:\d+/eureka/$`,
		`^alpha\s+zone-a\s+alive\s+\d+\s+(-|\d+ ms)\s+(yes|no|pending)\s+` + regexp.QuoteMeta(n1.URL()) + `\s*$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("members line %d = %q, want %s", i+1, lines[i], want)
		}
	}

	// --json hands over the node's own document.
	out.Reset()
	if code := run([]string{"members", "--json", "--url", n2.Addr()}, &out, &errOut); code != 0 {
		t.Fatalf("members --json: exit %d: %s", code, errOut.String())
	}
	var st ops.AdminStatus
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || st.Node != "beta" || len(st.Peers) != 1 || st.Peers[0].Name != "alpha" {
		t.Fatalf("members --json: %v %+v", err, st)
	}
}

// TestStatus_credentialsFromURL: user:pass in --url becomes HTTP Basic
// credentials, and no message ever shows the password. A proxy in front of
// a real node plays the part of a node with auth on.
func TestStatus_credentialsFromURL(t *testing.T) {
	n := startNode(t, "secured", "cluster.zone=zone-a")
	target, _ := url.Parse("http://" + n.Addr())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var sawAuth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		sawAuth = append(sawAuth, user)
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Basic realm="muster"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case user == "reader" && pass == "r3ad":
			http.Error(w, "forbidden", http.StatusForbidden)
		case user != "admin" || pass != "p@ss:w0rd":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	var out, errOut bytes.Buffer
	if code := run([]string{"status", "--url", "http://admin:" + url.QueryEscape("p@ss:w0rd") + "@" + host}, &out, &errOut); code != 0 {
		t.Fatalf("status with credentials: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "secured (zone zone-a)") {
		t.Fatalf("status through the secured front:\n%s", out.String())
	}
	for _, tc := range []struct {
		url, want string
	}{
		{"http://" + host, "401: the node wants credentials: --url http://USER:PASSWORD@" + host},
		{"http://admin:wrong-secret@" + host, "401: the node refused these credentials"},
		{"http://reader:r3ad@" + host, "403: this user may not read /admin/status"},
		{"http://admin:wrong-secret@127.0.0.1:1", "GET http://admin:xxxxx@127.0.0.1:1/admin/status"},
		{"ftp://admin:wrong-secret@" + host, "want http(s)://host:port"},
	} {
		out.Reset()
		errOut.Reset()
		code := run([]string{"members", "--timeout", "2s", "--url", tc.url}, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("members --url %s: exit %d, %q; want %q", tc.url, code, errOut.String(), tc.want)
		}
		for _, secret := range []string{"wrong-secret", "r3ad"} {
			if strings.Contains(errOut.String(), secret) {
				t.Errorf("the password shows in %q", errOut.String())
			}
		}
	}
	if len(sawAuth) < 4 {
		t.Errorf("the secured front saw %d requests, want 4", len(sawAuth))
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", 61 * time.Second: "1m01s",
		2*time.Hour + 5*time.Minute: "2h05m", 50 * time.Hour: "2d2h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestMembers_antiEntropyColumn: IN SYNC says n/a for a Eureka peer (it
// never serves anti-entropy) and why a Muster peer is not in sync; a failed
// round's error shows when replication has none.
func TestMembers_antiEntropyColumn(t *testing.T) {
	yes, no := true, false
	st := ops.AdminStatus{Node: "a", Peers: []ops.PeerInfo{
		{Name: "b", State: "alive", AntiEntropy: replication.AEInSync, InSync: &yes},
		{Name: "c", State: "alive", AntiEntropy: replication.AEDivergent, InSync: &no},
		{Name: "d", State: "static", AntiEntropy: replication.AEUnsupported},
		{Name: "e", State: "suspect", AntiEntropy: replication.AEFailing, InSync: &no, AntiEntropyError: "digest from e: 403"},
		{Name: "f", State: "alive", AntiEntropy: replication.AEPending, InSync: &no},
		{Name: "g", State: "alive", AntiEntropy: ops.AntiEntropyOff},
		{Name: "h", State: "alive", InSync: &yes}, // an older node: no state
	}}
	var out bytes.Buffer
	writeMembers(&out, st)
	for _, want := range []string{
		`(?m)^b\s+-\s+alive\s+0\s+-\s+yes\s+-\s*$`,
		`(?m)^c\s+-\s+alive\s+0\s+-\s+no\s+-\s*$`,
		`(?m)^d\s+-\s+static\s+0\s+-\s+n/a \(Eureka peer\)\s+-\s*$`,
		`(?m)^e\s+-\s+suspect\s+0\s+-\s+no \(round failed\)\s+-\s+anti-entropy: digest from e: 403$`,
		`(?m)^f\s+-\s+alive\s+0\s+-\s+pending\s+-\s*$`,
		`(?m)^g\s+-\s+alive\s+0\s+-\s+n/a \(anti-entropy off\)\s+-\s*$`,
		`(?m)^h\s+-\s+alive\s+0\s+-\s+yes\s+-\s*$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("members lacks %s:\n%s", want, out.String())
		}
	}
	out.Reset()
	writeStatus(&out, st)
	want := `(?m)^Anti-entropy\s+2 in sync, 1 not in sync, 1 n/a \(Eureka peer\), 1 not in sync \(round failed\), 1 pending, 1 n/a \(anti-entropy off\)$`
	if !regexp.MustCompile(want).MatchString(out.String()) {
		t.Errorf("status lacks %s:\n%s", want, out.String())
	}
}
