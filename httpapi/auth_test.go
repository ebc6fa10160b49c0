package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hudl/fargo"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/muster-registry/muster/auth"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

const (
	adminPW    = "admin-pw"
	readerPW   = "reader-pw"
	writerPW   = "writer-pw"
	teamPW     = "team-pw"
	hashedPW   = "hashed-pw"
	peerSecret = "a-peer-secret-of-32-characters!!"
)

// securedNode is a node with the users of every role and, optionally, a
// peer secret.
func newSecuredNode(t *testing.T, peerSecret string, users bool, opts ...func(*registry.Config, *httpapi.Config)) *testNode {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(hashedPW), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return newTestNode(t, append([]func(*registry.Config, *httpapi.Config){func(_ *registry.Config, h *httpapi.Config) {
		if users {
			var us []*auth.User
			for _, u := range []struct {
				name, pw string
				role     auth.Role
				apps     []string
			}{
				{"admin", "{noop}" + adminPW, auth.RoleAdmin, nil},
				{"reader", readerPW, auth.RoleRead, nil},
				{"writer", writerPW, auth.RoleWrite, nil},
				{"team", teamPW, auth.RoleWrite, []string{"orders"}},
				{"hashed", "{bcrypt}" + string(hash), auth.RoleWrite, nil},
			} {
				user, err := auth.NewUser(u.name, u.pw, u.role, u.apps)
				if err != nil {
					t.Fatal(err)
				}
				us = append(us, user)
			}
			a, err := auth.NewAuthenticator(us...)
			if err != nil {
				t.Fatal(err)
			}
			h.Auth = a
			h.Security.Auth = true
		}
		if peerSecret != "" {
			v, err := auth.NewPeerVerifier(peerSecret, 30*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			h.PeerVerifier = v
			h.Security.PeerAuth = true
		}
	}}, opts...)...)
}

func basic(user, pw string) []string {
	return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}
}

func with(headers ...[]string) []string {
	var out []string
	for _, h := range headers {
		out = append(out, h...)
	}
	return out
}

func registerBody(app, id string) string {
	return strings.NewReplacer("ORDERS", app, "host-a:orders:8080", id).Replace(springBody)
}

// Every route and role of items 1 and 2: none or wrong credentials are a
// 401 with the Basic challenge, a role that does not allow the request a
// 403; probes stay open; nothing refused changes the registry.
func TestAuth_rolesAndRoutes(t *testing.T) {
	n := newSecuredNode(t, "", true)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("ORDERS", "o1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("BILLING", "b1"))); err != nil {
		t.Fatal(err)
	}
	admin, reader, writer, team := basic("admin", adminPW), basic("reader", readerPW), basic("writer", writerPW), basic("team", teamPW)
	for _, tc := range []struct {
		name         string
		method, path string
		Body         string
		headers      []string
		want         int
	}{
		{"probe livez open", "GET", "/livez", "", nil, 200},
		{"probe readyz open", "GET", "/readyz", "", nil, 200},
		{"no credentials", "GET", "/eureka/apps", "", nil, 401},
		{"no credentials v2", "GET", "/eureka/v2/apps/ORDERS", "", nil, 401},
		{"no credentials dashboard", "GET", "/", "", nil, 401},
		{"no credentials metrics", "GET", "/metrics", "", nil, 401},
		{"no credentials admin", "GET", "/admin/status", "", nil, 401},
		{"no credentials register", "POST", "/eureka/apps/ORDERS", registerBody("ORDERS", "o9"), jsonHeaders(), 401},
		{"malformed base64", "GET", "/eureka/apps", "", []string{"Authorization", "Basic !!!not-base64"}, 401},
		{"no colon", "GET", "/eureka/apps", "", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin"))}, 401},
		{"bearer", "GET", "/eureka/apps", "", []string{"Authorization", "Bearer abc"}, 401},
		{"empty header", "GET", "/eureka/apps", "", []string{"Authorization", ""}, 401},
		{"unknown user", "GET", "/eureka/apps", "", basic("mallory", adminPW), 401},
		{"wrong password", "GET", "/eureka/apps", "", basic("admin", "nope"), 401},
		{"wrong bcrypt password", "GET", "/eureka/apps", "", basic("hashed", "nope"), 401},
		{"noop prefix is not part of the password", "GET", "/eureka/apps", "", basic("admin", "{noop}"+adminPW), 401},
		{"bcrypt password", "GET", "/eureka/apps", "", basic("hashed", hashedPW), 200},

		{"reader reads apps", "GET", "/eureka/apps", "", reader, 200},
		{"reader reads delta", "GET", "/eureka/apps/delta", "", reader, 200},
		{"reader reads app", "GET", "/eureka/apps/ORDERS", "", reader, 200},
		{"reader reads instance", "GET", "/eureka/apps/ORDERS/o1", "", reader, 200},
		{"reader reads vip", "GET", "/eureka/vips/orders", "", reader, 200},
		{"reader reads metrics", "GET", "/metrics", "", reader, 200},
		{"reader views dashboard", "GET", "/", "", reader, 200},
		{"reader no admin", "GET", "/admin/status", "", reader, 403},
		{"reader no register", "POST", "/eureka/apps/ORDERS", registerBody("ORDERS", "o9"), with(jsonHeaders(), reader), 403},
		{"reader no heartbeat", "PUT", "/eureka/apps/ORDERS/o1", "", reader, 403},
		{"reader no cancel", "DELETE", "/eureka/apps/ORDERS/o1", "", reader, 403},
		{"reader no status", "PUT", "/eureka/apps/ORDERS/o1/status?value=OUT_OF_SERVICE", "", reader, 403},
		{"reader no metadata", "PUT", "/eureka/apps/ORDERS/o1/metadata?v=2", "", reader, 403},

		{"writer heartbeat", "PUT", "/eureka/apps/BILLING/b1", "", writer, 200},
		{"writer no admin", "GET", "/admin/status", "", writer, 403},
		{"writer no batch", "POST", "/eureka/peerreplication/batch", `{"replicationList":[]}`, with(jsonHeaders(), writer), 403},
		{"team heartbeat own app", "PUT", "/eureka/apps/ORDERS/o1", "", team, 200},
		{"team heartbeat lower case app", "PUT", "/eureka/apps/orders/o1", "", team, 200},
		{"team register other app", "POST", "/eureka/apps/BILLING", registerBody("BILLING", "b9"), with(jsonHeaders(), team), 403},
		{"team cancel other app", "DELETE", "/eureka/apps/BILLING/b1", "", team, 403},
		{"team status other app", "PUT", "/eureka/apps/BILLING/b1/status?value=OUT_OF_SERVICE", "", team, 403},
		{"team delete override other app", "DELETE", "/eureka/apps/BILLING/b1/status", "", team, 403},
		{"team metadata other app", "PUT", "/eureka/apps/BILLING/b1/metadata?v=2", "", team, 403},
		{"team reads other app", "GET", "/eureka/apps/BILLING", "", team, 200},

		{"admin status", "GET", "/admin/status", "", admin, 200},
		{"admin batch without peer secret", "POST", "/eureka/peerreplication/batch", `{"replicationList":[]}`, with(jsonHeaders(), admin), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := n.reg.Snapshot().Version
			r := n.do(t, tc.method, tc.path, tc.Body, tc.headers...)
			if r.Code != tc.want {
				t.Fatalf("%s %s = %d %q, want %d", tc.method, tc.path, r.Code, r.Body, tc.want)
			}
			if r.Code == 401 && r.Header.Get("WWW-Authenticate") != `Basic realm="muster"` {
				t.Errorf("401 with WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
			}
			if r.Code >= 400 {
				if after := n.reg.Snapshot().Version; after != before {
					t.Errorf("refused request changed the registry (version %d → %d)", before, after)
				}
				for _, secret := range []string{adminPW, readerPW, writerPW, teamPW, hashedPW} {
					if strings.Contains(r.Body, secret) {
						t.Errorf("answer %q holds a password", r.Body)
					}
				}
			}
		})
	}
	if _, ok := n.reg.Instance("BILLING", "b1"); !ok {
		t.Error("BILLING/b1 gone: a team user's cancel of another team's app went through")
	}
	// Allowed writes do go through.
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", registerBody("ORDERS", "o2"), with(jsonHeaders(), team)...); r.Code != 204 {
		t.Fatalf("team register own app = %d %q", r.Code, r.Body)
	}
	if r := n.do(t, "DELETE", "/eureka/apps/ORDERS/o2", "", team...); r.Code != 200 {
		t.Fatalf("team cancel own app = %d %q", r.Code, r.Body)
	}

	m := n.do(t, "GET", "/metrics", "", admin...)
	for _, want := range []string{
		`muster_auth_failures_total{reason="missing_credentials"} 6`,
		`muster_auth_failures_total{reason="malformed_header"} 4`,
		`muster_auth_failures_total{reason="unknown_user"} 1`,
		`muster_auth_failures_total{reason="bad_password"} 3`,
		`muster_auth_failures_total{reason="forbidden"} 13`,
	} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, failureLines(m.Body))
		}
	}
}

// Without the peer secret, the replication header is honoured only from an
// admin (a Spring peer with the admin's credentials in its URL); from a
// write user the request is an ordinary client write.
func TestAuth_replicationHeader_noPeerSecret(t *testing.T) {
	n := newSecuredNode(t, "", true)
	origins := n.reg.Subscribe()
	defer origins.Close()
	rep := []string{"X-Netflix-Discovery-Replication", "true"}
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", registerBody("ORDERS", "w1"), with(jsonHeaders(), rep, basic("writer", writerPW))...); r.Code != 204 {
		t.Fatalf("writer register = %d", r.Code)
	}
	if r := n.do(t, "POST", "/eureka/apps/ORDERS", registerBody("ORDERS", "a1"), with(jsonHeaders(), rep, basic("admin", adminPW))...); r.Code != 204 {
		t.Fatalf("admin register = %d", r.Code)
	}
	replicated := replicatedFlags(origins)
	if len(replicated) != 2 || replicated[0] || !replicated[1] {
		t.Errorf("replicated flags = %v, want [false true]: only the admin's header counts", replicated)
	}
}

// signedClient signs requests to a node as a peer would.
type signedClient struct {
	t      *testing.T
	n      *testNode
	signer *auth.PeerSigner
}

func newSignedClient(t *testing.T, n *testNode, secret string) *signedClient {
	s, err := auth.NewPeerSigner(secret, "node-b", n.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	return &signedClient{t, n, s}
}

// request builds a signed request; send it with send.
func (sc *signedClient) request(method, path, body string) *http.Request {
	req, err := http.NewRequest(method, sc.n.http.URL+path, strings.NewReader(body))
	if err != nil {
		sc.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Netflix-Discovery-Replication", "true")
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	sc.signer.Sign(req, b)
	return req
}

func send(t *testing.T, req *http.Request, body string) (int, string) {
	t.Helper()
	req.Body = http.NoBody
	if body != "" {
		req.Body = ioNopCloser(body)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String()
}

func batchBody(t *testing.T, tasks ...replication.Task) string {
	t.Helper()
	var b bytes.Buffer
	items := make([]map[string]any, 0, len(tasks))
	for _, task := range tasks {
		it := map[string]any{"appName": task.Key.App, "id": task.Key.ID, "action": string(task.Action)}
		if task.Instance != nil {
			it["lastDirtyTimestamp"] = task.Instance.LastDirtyTimestamp
			var inst map[string]any
			if err := json.Unmarshal([]byte(registerBody(task.Key.App, task.Key.ID)), &inst); err != nil {
				t.Fatal(err)
			}
			it["instanceInfo"] = inst["instance"]
		}
		items = append(items, it)
	}
	if err := json.NewEncoder(&b).Encode(map[string]any{"replicationList": items}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func registerTask(app, id string) replication.Task {
	return replication.Task{Action: registry.ActionRegister, Key: registry.InstanceKey{App: app, ID: id}, Instance: registrytest.NewInstance(app, id)}
}

// Item 3: with a peer secret the batch endpoint takes only a valid
// signature; bad, stale and replayed ones are refused with 401 and change
// nothing; user credentials, even admin, get 403. Each refusal is counted
// and logged once per source.
func TestAuth_peerBatch(t *testing.T) {
	var logs testlog.Buffer
	n := newSecuredNode(t, peerSecret, true, func(_ *registry.Config, h *httpapi.Config) {
		h.Logger = zerolog.New(&logs)
	})
	good := newSignedClient(t, n, peerSecret)
	wrong := newSignedClient(t, n, "another-secret-of-32-characters!")

	body := batchBody(t, registerTask("EVIL", "e1"))
	req := good.request("POST", "/eureka/peerreplication/batch", body)
	if code, b := send(t, req.Clone(context.Background()), body); code != 200 {
		t.Fatalf("signed batch = %d %q", code, b)
	}
	if _, ok := n.reg.Instance("EVIL", "e1"); !ok {
		t.Fatal("signed batch not applied")
	}
	if _, err := n.reg.Apply(registry.CancelOp("EVIL", "e1").From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  func() *http.Request
		Body string
		want int
	}{
		{"replayed", func() *http.Request { return req.Clone(context.Background()) }, body, 401},
		{"wrong secret", func() *http.Request { return wrong.request("POST", "/eureka/peerreplication/batch", body) }, body, 401},
		{"body swapped after signing", func() *http.Request {
			return good.request("POST", "/eureka/peerreplication/batch", batchBody(t, registerTask("OTHER", "x")))
		}, body, 401},
		{"stale", func() *http.Request {
			r := good.request("POST", "/eureka/peerreplication/batch", body)
			n.clock.Advance(31 * time.Second)
			return r
		}, body, 401},
		{"future", func() *http.Request {
			n.clock.Advance(time.Minute)
			r := good.request("POST", "/eureka/peerreplication/batch", body)
			n.clock.Advance(-time.Minute)
			return r
		}, body, 401},
		{"malformed signature", func() *http.Request {
			r := good.request("POST", "/eureka/peerreplication/batch", body)
			r.Header.Set(auth.HeaderPeerSignature, "v1=xyz")
			return r
		}, body, 401},
		{"admin credentials", func() *http.Request {
			r, _ := http.NewRequest("POST", n.http.URL+"/eureka/peerreplication/batch", nil)
			r.SetBasicAuth("admin", adminPW)
			r.Header.Set("Content-Type", "application/json")
			return r
		}, body, 403},
		{"nothing", func() *http.Request {
			r, _ := http.NewRequest("POST", n.http.URL+"/eureka/peerreplication/batch", nil)
			return r
		}, body, 403},
		{"signed write route", func() *http.Request {
			return good.request("POST", "/eureka/apps/EVIL", registerBody("EVIL", "e1"))
		}, registerBody("EVIL", "e1"), 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := send(t, tc.req(), tc.Body)
			if code != tc.want {
				t.Fatalf("= %d %q, want %d", code, b, tc.want)
			}
			if _, ok := n.reg.Instance("EVIL", "e1"); ok {
				t.Fatal("refused batch was applied")
			}
			if _, ok := n.reg.Instance("OTHER", "x"); ok {
				t.Fatal("refused batch was applied")
			}
		})
	}
	// A signed syncUp fetch reads without user credentials.
	if code, b := send(t, good.request("GET", "/eureka/apps", ""), ""); code != 200 {
		t.Fatalf("signed GET /apps = %d %q", code, b)
	}

	m := n.do(t, "GET", "/metrics", "", basic("admin", adminPW)...)
	for _, want := range []string{
		`muster_auth_failures_total{reason="peer_replayed"} 1`,
		`muster_auth_failures_total{reason="peer_bad_signature"} 2`,
		`muster_auth_failures_total{reason="peer_stale"} 2`,
		`muster_auth_failures_total{reason="peer_malformed"} 1`,
		`muster_auth_failures_total{reason="peer_signature_required"} 2`,
		`muster_auth_failures_total{reason="forbidden"} 1`,
	} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	out := logs.String()
	if c := strings.Count(out, "refused peer request"); c != 1 {
		t.Errorf("%d 'refused peer request' lines for 8 refusals from one source, want 1 (rate-limited):\n%s", c, out)
	}
	for _, secret := range []string{peerSecret, adminPW, "v1="} {
		if strings.Contains(out, secret) {
			t.Errorf("log holds a secret or signature (%q):\n%s", secret, out)
		}
	}
	// The limiter lets the next line out a minute later and says how many
	// it held back.
	n.clock.Advance(61 * time.Second)
	send(t, wrong.request("POST", "/eureka/peerreplication/batch", body), body)
	if out := logs.String(); strings.Count(out, "refused peer request") != 2 || !strings.Contains(out, `"suppressed_since_last":7`) {
		t.Errorf("after a minute: want a second line counting 7 held back:\n%s", out)
	}
}

// Item 3, the header: with a peer secret, x-netflix-discovery-replication
// without a valid signature is ignored. The write is an ordinary client
// write (the caller's role applies, and it is replicated to every peer),
// so a spoofed "replicated" cancel can no longer remove an instance from
// one node only. Reads marked with it get no syncing-node privileges.
func TestAuth_replicationHeaderNeedsSignature(t *testing.T) {
	for _, users := range []bool{false, true} {
		name := "peer secret only"
		if users {
			name = "peer secret and users"
		}
		t.Run(name, func(t *testing.T) {
			n := newSecuredNode(t, peerSecret, users)
			origins := n.reg.Subscribe()
			defer origins.Close()
			creds := basic("admin", adminPW)
			rep := []string{"X-Netflix-Discovery-Replication", "true"}
			if r := n.do(t, "POST", "/eureka/apps/ORDERS", registerBody("ORDERS", "o1"), with(jsonHeaders(), rep, creds)...); r.Code != 204 {
				t.Fatalf("register = %d %q", r.Code, r.Body)
			}
			if r := n.do(t, "DELETE", "/eureka/apps/ORDERS/o1", "", with(rep, creds)...); r.Code != 200 {
				t.Fatalf("cancel = %d %q", r.Code, r.Body)
			}
			replicated := replicatedFlags(origins)
			if len(replicated) != 2 || replicated[0] || replicated[1] {
				t.Errorf("replicated flags = %v, want [false false]: an unsigned header must not mark a write as replicated", replicated)
			}
		})
	}
}

// The real transport signs, the real endpoint verifies.
func TestAuth_transportSigns(t *testing.T) {
	n := newSecuredNode(t, peerSecret, true)
	for _, tc := range []struct {
		secret string
		want   int
	}{{peerSecret, 0}, {"another-secret-of-32-characters!", 401}} {
		signer, err := auth.NewPeerSigner(tc.secret, "node-b", n.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		tr := replicationtest.HTTPTransport(t, 5*time.Second, func(c *replication.HTTPTransportConfig) { c.Signer = signer.Sign })
		in := registrytest.NewInstance("APP", "i-"+tc.secret[:3])
		_, err = tr.Send(context.Background(), replication.Peer{Name: "a", URL: n.http.URL + "/eureka/"},
			replication.Batch{Tasks: []replication.Task{{Action: registry.ActionRegister, Key: registry.InstanceKey{App: "APP", ID: in.InstanceID}, Instance: in}}})
		_, applied := n.reg.Instance("APP", in.InstanceID)
		if tc.want == 0 {
			if err != nil || !applied {
				t.Fatalf("signed send: err %v, applied %v", err, applied)
			}
			continue
		}
		var se *replication.StatusError
		if !asStatus(err, &se) || se.Code != tc.want || applied {
			t.Fatalf("wrong secret: err %v, applied %v; want HTTP %d and nothing applied", err, applied, tc.want)
		}
	}
}

// /admin/status reports the security settings; the dashboard says when
// the registry is open.
func TestAuth_securityReported(t *testing.T) {
	open := newTestNode(t)
	var st ops.AdminStatus
	r := open.do(t, "GET", "/admin/status", "")
	if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
		t.Fatal(err)
	}
	if st.Security != (httpapi.Security{ClientAuth: "none"}) {
		t.Errorf("open node security = %+v", st.Security)
	}
	if !strings.Contains(r.Body, `"security": {`) || !strings.Contains(r.Body, `"gossipEncrypted": false`) {
		t.Errorf("/admin/status lacks the security object:\n%s", r.Body)
	}
	if d := open.do(t, "GET", "/", ""); !strings.Contains(d.Body, "THIS REGISTRY IS OPEN") {
		t.Error("dashboard of an open node does not say it is open")
	}

	secured := newSecuredNode(t, peerSecret, true, func(_ *registry.Config, h *httpapi.Config) {
		h.Security.GossipEncrypted = true
	})
	r = secured.do(t, "GET", "/admin/status", "", basic("admin", adminPW)...)
	st = ops.AdminStatus{}
	if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
		t.Fatal(err)
	}
	if want := (httpapi.Security{Auth: true, ClientAuth: "none", PeerAuth: true, GossipEncrypted: true}); st.Security != want {
		t.Errorf("secured node security = %+v, want %+v", st.Security, want)
	}
	if d := secured.do(t, "GET", "/", "", basic("reader", readerPW)...); d.Code != 200 || strings.Contains(d.Body, "THIS REGISTRY IS OPEN") {
		t.Errorf("dashboard of a secured node: %d, open banner shown: %v", d.Code, strings.Contains(d.Body, "THIS REGISTRY IS OPEN"))
	}
}

// A real client authenticates the way Spring clients do: credentials in
// the service URL (hudl/fargo, as go-kit uses it).
func TestAuth_fargoWithCredentialsInURL(t *testing.T) {
	n := newSecuredNode(t, peerSecret, true)
	u, _ := url.Parse(n.http.URL + "/eureka")
	u.User = url.UserPassword("hashed", hashedPW)
	conn := fargo.NewConn(u.String())
	conn.UseJson = true
	ins := &fargo.Instance{
		InstanceId: "host-1:billing:9000", HostName: "host-1", App: "billing", IPAddr: "10.0.0.7",
		VipAddress: "billing", SecureVipAddress: "billing", Status: fargo.UP, Port: 9000, PortEnabled: true,
		DataCenterInfo: fargo.DataCenterInfo{Name: fargo.MyOwn},
		LeaseInfo:      fargo.LeaseInfo{RenewalIntervalInSecs: 30, DurationInSecs: 90},
	}
	if err := conn.RegisterInstance(ins); err != nil {
		t.Fatalf("register with credentials: %v", err)
	}
	for i := 0; i < 3; i++ {
		if err := conn.HeartBeatInstance(ins); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	if app, err := conn.GetApp("BILLING"); err != nil || len(app.Instances) != 1 {
		t.Fatalf("get app: %v", err)
	}
	if err := conn.DeregisterInstance(ins); err != nil {
		t.Fatalf("deregister: %v", err)
	}

	u.User = url.UserPassword("hashed", "wrong")
	bad := fargo.NewConn(u.String())
	bad.UseJson = true
	err := bad.RegisterInstance(ins)
	if code, ok := fargo.HTTPResponseStatusCode(err); !ok || code != 401 {
		t.Fatalf("register with a wrong password: %v, want HTTP 401", err)
	}
	if n.reg.Len() != 0 {
		t.Fatal("register with a wrong password was applied")
	}
}

func ioNopCloser(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

func asStatus(err error, se **replication.StatusError) bool { return errors.As(err, se) }

func failureLines(metrics string) string {
	var out []string
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "muster_auth_failures_total{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// replicatedFlags reads the registry's change stream and says, per change,
// whether it was applied as a peer's (not a client's) write.
func replicatedFlags(cur *registry.Cursor) []bool {
	var out []bool
	evs, _ := cur.Read(nil)
	for _, ev := range evs {
		out = append(out, ev.Origin != registry.OriginClient)
	}
	return out
}
