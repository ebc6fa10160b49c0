package auth_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/auth"
)

const secret = "0123456789abcdef-peer-secret"

var t0 = time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)

func signed(t *testing.T, secret string, at time.Time, method, url string, body []byte) *http.Request {
	t.Helper()
	s, err := auth.NewPeerSigner(secret, "node-a", func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Sign(req, body)
	return req
}

func verify(v *auth.PeerVerifier, req *http.Request, body []byte, now time.Time) (string, auth.Failure) {
	return v.Verify(req.Header, req.Method, req.URL.EscapedPath(), req.URL.RawQuery, body, now)
}

func TestPeerVerifier_Verify(t *testing.T) {
	body := []byte(`{"replicationList":[]}`)
	const url = "http://10.0.0.5:8761/eureka/peerreplication/batch"
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		body   []byte
		method string
		path   string
		now    time.Time
		want   auth.Failure
	}{
		{name: "good", req: func() *http.Request { return signed(t, secret, t0, "POST", url, body) }, want: auth.FailureNone},
		{name: "trailing slash on one side", req: func() *http.Request { return signed(t, secret, t0, "POST", url+"/", body) }, want: auth.FailureNone},
		{name: "skew within window", req: func() *http.Request { return signed(t, secret, t0, "POST", url, body) }, now: t0.Add(29 * time.Second), want: auth.FailureNone},
		{name: "wrong secret", req: func() *http.Request { return signed(t, "another-secret-of-16+", t0, "POST", url, body) }, want: auth.FailurePeerBad},
		{name: "body changed", req: func() *http.Request { return signed(t, secret, t0, "POST", url, body) }, body: []byte(`{"replicationList":[{}]}`), want: auth.FailurePeerBad},
		{name: "method changed", req: func() *http.Request { return signed(t, secret, t0, "POST", url, body) }, method: "PUT", want: auth.FailurePeerBad},
		{name: "path changed", req: func() *http.Request { return signed(t, secret, t0, "POST", url, body) }, path: "/eureka/apps/EVIL", want: auth.FailurePeerBad},
		{name: "expired", req: func() *http.Request { return signed(t, secret, t0, "POST", url, body) }, now: t0.Add(31 * time.Second), want: auth.FailurePeerStale},
		{name: "from the future", req: func() *http.Request { return signed(t, secret, t0.Add(time.Minute), "POST", url, body) }, want: auth.FailurePeerStale},
		{name: "timestamp edited", req: func() *http.Request {
			r := signed(t, secret, t0.Add(-time.Hour), "POST", url, body)
			r.Header.Set(auth.HeaderPeerTimestamp, "1796094000000")
			return r
		}, want: auth.FailurePeerBad},
		{name: "node edited", req: func() *http.Request {
			r := signed(t, secret, t0, "POST", url, body)
			r.Header.Set(auth.HeaderPeerNode, "node-b")
			return r
		}, want: auth.FailurePeerBad},
		{name: "no timestamp", req: func() *http.Request {
			r := signed(t, secret, t0, "POST", url, body)
			r.Header.Del(auth.HeaderPeerTimestamp)
			return r
		}, want: auth.FailurePeerMalformed},
		{name: "signature not hex", req: func() *http.Request {
			r := signed(t, secret, t0, "POST", url, body)
			r.Header.Set(auth.HeaderPeerSignature, "v1=zz")
			return r
		}, want: auth.FailurePeerMalformed},
		{name: "unknown scheme", req: func() *http.Request {
			r := signed(t, secret, t0, "POST", url, body)
			r.Header.Set(auth.HeaderPeerSignature, "v2="+strings.Repeat("0", 64))
			return r
		}, want: auth.FailurePeerMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := auth.NewPeerVerifier(secret, 30*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			req := tc.req()
			b, method, path, now := body, req.Method, req.URL.EscapedPath(), t0
			if tc.body != nil {
				b = tc.body
			}
			if tc.method != "" {
				method = tc.method
			}
			if tc.path != "" {
				path = tc.path
			}
			if !tc.now.IsZero() {
				now = tc.now
			}
			node, f := v.Verify(req.Header, method, path, "", b, now)
			if f != tc.want {
				t.Fatalf("Verify = %q, want %q", f, tc.want)
			}
			if f == auth.FailureNone && node != "node-a" {
				t.Errorf("node = %q, want node-a", node)
			}
		})
	}
}

func TestPeerVerifier_Verify_replay(t *testing.T) {
	v, err := auth.NewPeerVerifier(secret, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	req := signed(t, secret, t0, "GET", "http://h/eureka/apps", nil)
	if _, f := verify(v, req, nil, t0); f != auth.FailureNone {
		t.Fatalf("first use: %q", f)
	}
	if _, f := verify(v, req, nil, t0.Add(time.Second)); f != auth.FailurePeerReplayed {
		t.Fatalf("second use = %q, want %q", f, auth.FailurePeerReplayed)
	}
	// Once out of the window it is refused as stale, and forgotten.
	if _, f := verify(v, req, nil, t0.Add(time.Minute)); f != auth.FailurePeerStale {
		t.Fatalf("use after the window = %q, want stale", f)
	}
	fresh := signed(t, secret, t0.Add(time.Minute), "GET", "http://h/eureka/apps", nil)
	if _, f := verify(v, fresh, nil, t0.Add(time.Minute)); f != auth.FailureNone {
		t.Fatalf("fresh: %q", f)
	}
	if n := v.Remembered(); n != 1 {
		t.Errorf("remembered %d signatures, want 1: stale ones must be forgotten", n)
	}
}

// Memory is bounded: past the limit the oldest signatures are forgotten,
// and everything signed at or before them is refused, so forgetting never
// lets a replay through.
func TestPeerVerifier_Verify_boundedMemory(t *testing.T) {
	v, err := auth.NewPeerVerifier(secret, 30*time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*http.Request
	for i := 0; i < 25; i++ {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		r := signed(t, secret, at, "GET", "http://h/eureka/apps", nil)
		reqs = append(reqs, r)
		if _, f := verify(v, r, nil, t0.Add(time.Second)); f != auth.FailureNone {
			t.Fatalf("request %d: %q", i, f)
		}
	}
	if n := v.Remembered(); n > 10 {
		t.Errorf("remembered %d, want at most 10", n)
	}
	for i, r := range reqs {
		if _, f := verify(v, r, nil, t0.Add(2*time.Second)); f != auth.FailurePeerReplayed {
			t.Errorf("replay of request %d = %q, want %q", i, f, auth.FailurePeerReplayed)
		}
	}
}

func TestNewPeerSigner_shortSecret(t *testing.T) {
	if _, err := auth.NewPeerSigner("short", "n", nil); err == nil {
		t.Error("short secret accepted by the signer")
	}
	if _, err := auth.NewPeerVerifier("short", 0, 0); err == nil {
		t.Error("short secret accepted by the verifier")
	}
}
