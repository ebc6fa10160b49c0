package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/internal/redact"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
)

// Anti-entropy over real HTTP: a node that lost changes pulls them from a
// peer's /peerreplication/digest and /copies, and the next round finds
// both in sync in one small request.
func TestAntiEntropy_overHTTP(t *testing.T) {
	peer := newTestNode(t)
	for i := range 5 {
		if _, err := peer.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP", fmt.Sprint("i-", i)))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := registry.DefaultConfig()
	cfg.Now = peer.clock.Now
	local, _ := registry.New(cfg)
	// local holds an older copy of i-0 and a cancelled i-1.
	snap := peer.reg.Snapshot()
	app, _ := snap.App("APP")
	for _, iv := range app.Instances[:2] {
		if _, err := local.Apply(registry.RegisterOp(iv.Instance.Clone()).From(registry.OriginPeer)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := peer.reg.Apply(registry.StatusOp("APP", "i-0", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.reg.Apply(registry.CancelOp("APP", "i-1")); err != nil {
		t.Fatal(err)
	}
	tr := newPeerTransport(t, 5*time.Second)
	p := replication.Peer{Name: "peer", URL: peer.http.URL + "/eureka/", Muster: true}
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: local, Transport: tr, Peers: func() []replication.Peer { return []replication.Peer{p} }, Now: peer.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	res := ae.Round(context.Background(), p)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Repaired != (replication.Repairs{Missing: 3, Stale: 1, Cancelled: 1}) {
		t.Fatalf("repairs %+v", res.Repaired)
	}
	if local.RootDigest() != peer.reg.RootDigest() {
		t.Fatal("root digests differ after a round")
	}
	before := tr.AntiEntropyBytes()
	if res := ae.Round(context.Background(), p); !res.InSync || res.Requests != 1 {
		t.Fatalf("second round %+v", res)
	}
	if b := tr.AntiEntropyBytes() - before; b > 100 {
		t.Fatalf("a round in sync exchanged %d bytes", b)
	}
}

// Versions travel in batches to Muster peers: a status change arrives as
// the whole copy its write made, and a stale copy does not overwrite a
// newer one.
func TestPeerBatch_versionsBetweenMusterPeers(t *testing.T) {
	n := newTestNode(t)
	cfg := registry.DefaultConfig()
	cfg.Now = n.clock.Now
	src, _ := registry.New(cfg)
	in, err := src.Apply(registry.RegisterOp(registrytest.NewInstance("APP", "i-1")))
	if err != nil {
		t.Fatal(err)
	}
	out, err := src.Apply(registry.StatusOp("APP", "i-1", registry.StatusOutOfService))
	if err != nil {
		t.Fatal(err)
	}
	k := registry.InstanceKey{App: "APP", ID: "i-1"}
	tr := newPeerTransport(t, 5*time.Second)
	p := replication.Peer{Name: "b", URL: n.http.URL + "/eureka/", Muster: true}
	// The status change first (its register was lost), then the stale
	// register arriving late.
	batch := replication.Batch{Versioned: true, Tasks: []replication.Task{
		{Action: registry.ActionStatusUpdate, Key: k, Instance: out},
		{Action: registry.ActionRegister, Key: k, Instance: in},
	}}
	res, err := tr.Send(context.Background(), p, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range res.Items {
		if it.StatusCode != 200 {
			t.Fatalf("item %d: %d", i, it.StatusCode)
		}
	}
	iv, ok := n.reg.Instance("APP", "i-1")
	if !ok || iv.Status != registry.StatusOutOfService || iv.WriteVersion != out.WriteVersion {
		t.Fatalf("stored %+v", iv.Instance)
	}
	// A heartbeat with an older version gets 409 and our copy, version
	// included.
	res, err = tr.Send(context.Background(), p, replication.Batch{Versioned: true, Tasks: []replication.Task{
		{Action: registry.ActionHeartbeat, Key: k, Instance: in},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if it := res.Items[0]; it.StatusCode != 409 || it.Instance == nil || it.Instance.WriteVersion != out.WriteVersion {
		t.Fatalf("stale heartbeat answer %+v", it)
	}
}

// The anti-entropy endpoints are peer routes: with a peer secret only a
// valid signature gets in (403 without one); bad bodies are 400, oversized
// ones 413, and a node without anti-entropy answers 404 as Eureka does.
func TestAntiEntropy_endpointsAreGuardedAndBounded(t *testing.T) {
	n := newSecuredNode(t, peerSecret, false)
	good := newSignedClient(t, n, peerSecret)
	for _, tc := range []struct {
		name, path, body string
		signed           bool
		want             int
	}{
		{"signed digest", "/eureka/peerreplication/digest", `{"root":1}`, true, 200},
		{"signed copies", "/eureka/v2/peerreplication/copies", `{"keys":[{"app":"APP","id":"x"}]}`, true, 200},
		{"unsigned digest", "/eureka/peerreplication/digest", `{"root":1}`, false, 403},
		{"unsigned copies", "/eureka/peerreplication/copies", `{"keys":[]}`, false, 403},
		{"unreadable", "/eureka/peerreplication/digest", `{"root":`, true, 400},
		{"too many keys", "/eureka/peerreplication/copies", manyKeys(replication.MaxCopyKeys + 1), true, 400},
		{"keys not a list", "/eureka/peerreplication/copies", `{"keys":"APP"}`, true, 400},
		{"signed buckets", "/eureka/peerreplication/digest", `{"root":1,"buckets":{"APP":16}}`, true, 200},
		{"signed narrowed entries", "/eureka/peerreplication/digest", `{"root":1,"apps":["APP"],"only":{"APP":{"n":16,"b":[0,15]}}}`, true, 200},
		{"no buckets", "/eureka/peerreplication/digest", `{"root":1,"buckets":{"APP":0}}`, true, 400},
		{"too many buckets", "/eureka/peerreplication/digest", fmt.Sprintf(`{"root":1,"buckets":{"APP":%d}}`, replication.MaxBuckets+1), true, 400},
		{"bucket out of range", "/eureka/peerreplication/digest", `{"root":1,"apps":["APP"],"only":{"APP":{"n":16,"b":[16]}}}`, true, 400},
		{"negative bucket", "/eureka/peerreplication/digest", `{"root":1,"apps":["APP"],"only":{"APP":{"n":16,"b":[-1]}}}`, true, 400},
		{"too many apps with buckets", "/eureka/peerreplication/digest", manyApps(replication.MaxDigestApps), true, 400},
		{"too large", "/eureka/peerreplication/copies", `{"keys":[{"app":"` + strings.Repeat("A", 2<<20) + `"}]}`, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *http.Request
			if tc.signed {
				req = good.request("POST", tc.path, tc.body)
			} else {
				req, _ = http.NewRequest("POST", n.http.URL+tc.path, nil)
				req.Header.Set("Content-Type", "application/json")
			}
			if code, b := send(t, req, tc.body); code != tc.want {
				t.Fatalf("= %d %q, want %d", code, b, tc.want)
			}
		})
	}

	// A Java Eureka server has no such route.
	eureka := httptest.NewServer(http.NotFoundHandler())
	defer eureka.Close()
	tr := newPeerTransport(t, 5*time.Second)
	_, err := tr.Digest(context.Background(), replication.Peer{Name: "eureka", URL: eureka.URL + "/eureka/"}, replication.DigestRequest{})
	if !errors.Is(err, replication.ErrNoAntiEntropy) {
		t.Fatalf("node without anti-entropy: %v", err)
	}
}

// manyApps asks for the entries of n apps and the buckets of one more.
func manyApps(n int) string {
	var b strings.Builder
	b.WriteString(`{"root":1,"apps":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"APP-%d"`, i)
	}
	b.WriteString(`],"buckets":{"BIG":16}}`)
	return b.String()
}

func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{"keys":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"app":"APP","id":"i-%d"}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// A peer that refuses anti-entropy (403) is warned about at the default
// level, with the error; one that cannot be reached and never answered
// (a peer still starting) is said once at info level. Neither line
// carries the credentials of its URL.
func TestAntiEntropy_failureWarnedWithoutCredentials(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer refusing.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	cfg := registry.DefaultConfig()
	local, _ := registry.New(cfg)
	var logs strings.Builder
	tr := newPeerTransport(t, 5*time.Second)
	var peers []replication.Peer
	for _, u := range []string{refusing.URL, goneURL} {
		raw := strings.Replace(u, "http://", "http://admin:s3cr3t@", 1) + "/eureka/"
		peers = append(peers, replication.Peer{Name: redact.URL(raw), URL: raw, Muster: true})
	}
	ae, err := replication.NewAntiEntropy(replication.AntiEntropyConfig{
		Store: local, Transport: tr, Peers: func() []replication.Peer { return peers },
		Logger: zerolog.New(&logs).Level(zerolog.InfoLevel),
	})
	if err != nil {
		t.Fatal(err)
	}
	ae.RoundAll(context.Background())
	out := logs.String()
	if strings.Count(out, `"level":"warn"`) != 1 || !strings.Contains(out, "403") {
		t.Errorf("want a warning for the refusing peer, the 403 named:\n%s", out)
	}
	if strings.Count(out, `"level":"info"`) != 1 || !strings.Contains(out, "not answering yet") {
		t.Errorf("want one info line for the peer not up yet:\n%s", out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Errorf("the log carries a password:\n%s", out)
	}
	for _, st := range ae.Stats() {
		if st.State() != replication.AEFailing || strings.Contains(st.LastError, "s3cr3t") {
			t.Errorf("%+v", st)
		}
	}
}
