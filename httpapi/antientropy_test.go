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
	"github.com/muster-registry/muster/registry/wire"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

// The anti-entropy endpoints are peer routes: with a peer secret only a
// valid signature gets in (403 without one); bad bodies are 400, oversized
// ones 413, and a node without anti-entropy answers 404 as Eureka does.
func TestAntiEntropy_endpointsAreGuardedAndBounded(t *testing.T) {
	n := newSecuredNode(t, peerSecret, false)
	good := newSignedClient(t, n, peerSecret)
	for _, tc := range []struct {
		name, path, Body string
		signed           bool
		want             int
	}{
		{"signed digest", "/eureka/peerreplication/digest", `{"root":1}`, true, 200},
		{"signed copies", "/eureka/v2/peerreplication/copies", `{"keys":[{"app":"APP","id":"x"}]}`, true, 200},
		{"unsigned digest", "/eureka/peerreplication/digest", `{"root":1}`, false, 403},
		{"unsigned copies", "/eureka/peerreplication/copies", `{"keys":[]}`, false, 403},
		{"unreadable", "/eureka/peerreplication/digest", `{"root":`, true, 400},
		{"too many keys", "/eureka/peerreplication/copies", manyKeys(wire.MaxCopyKeys + 1), true, 400},
		{"keys not a list", "/eureka/peerreplication/copies", `{"keys":"APP"}`, true, 400},
		{"signed buckets", "/eureka/peerreplication/digest", `{"root":1,"buckets":{"APP":16}}`, true, 200},
		{"signed narrowed entries", "/eureka/peerreplication/digest", `{"root":1,"apps":["APP"],"only":{"APP":{"n":16,"b":[0,15]}}}`, true, 200},
		{"no buckets", "/eureka/peerreplication/digest", `{"root":1,"buckets":{"APP":0}}`, true, 400},
		{"too many buckets", "/eureka/peerreplication/digest", fmt.Sprintf(`{"root":1,"buckets":{"APP":%d}}`, wire.MaxBuckets+1), true, 400},
		{"bucket out of range", "/eureka/peerreplication/digest", `{"root":1,"apps":["APP"],"only":{"APP":{"n":16,"b":[16]}}}`, true, 400},
		{"negative bucket", "/eureka/peerreplication/digest", `{"root":1,"apps":["APP"],"only":{"APP":{"n":16,"b":[-1]}}}`, true, 400},
		{"too many apps with buckets", "/eureka/peerreplication/digest", manyApps(wire.MaxDigestApps), true, 400},
		{"too large", "/eureka/peerreplication/copies", `{"keys":[{"app":"` + strings.Repeat("A", 2<<20) + `"}]}`, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *http.Request
			if tc.signed {
				req = good.request("POST", tc.path, tc.Body)
			} else {
				req, _ = http.NewRequest("POST", n.http.URL+tc.path, nil)
				req.Header.Set("Content-Type", "application/json")
			}
			if code, b := send(t, req, tc.Body); code != tc.want {
				t.Fatalf("= %d %q, want %d", code, b, tc.want)
			}
		})
	}

	// A Java Eureka server has no such route.
	eureka := httptest.NewServer(http.NotFoundHandler())
	defer eureka.Close()
	tr := replicationtest.HTTPTransport(t, 5*time.Second)
	_, err := tr.Digest(context.Background(), replication.Peer{Name: "eureka", URL: eureka.URL + "/eureka/"}, wire.DigestRequest{})
	if !errors.Is(err, replication.ErrNoAntiEntropy) {
		t.Fatalf("node without anti-entropy: %v", err)
	}
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
	tr := replicationtest.HTTPTransport(t, 5*time.Second)
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
