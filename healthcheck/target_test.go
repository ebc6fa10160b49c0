package healthcheck_test

import (
	"crypto/tls"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-registry/muster/healthcheck"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func newSingle(t *testing.T, cfgFn func(*healthcheck.Config), opt healthcheck.Options) (*registry.Registry, *registrytest.Clock, *healthcheck.Checker) {
	t.Helper()
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, clk.Now)
	if cfgFn != nil {
		cfgFn(&cfg)
	}
	opt.Registry = reg
	if opt.Self == "" {
		opt.Self = "n1"
	}
	if opt.Members == nil {
		opt.Members = func() []string { return []string{"n1"} }
	}
	chk, err := healthcheck.New(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return reg, clk, chk
}

// A registration may name any address; the checker connects to none it
// must not. Each case points at a listener that counts connections (or, for
// addresses no test may listen on, checks that nothing was dialled at all).
func TestChecker_neverRequestsForbiddenTargets(t *testing.T) {
	trap := newCounter(t, "127.0.0.1:0")      // "the node itself" and loopback
	elsewhere := newCounter(t, "127.0.0.3:0") // another host (on loopback, as tests must)
	trapURL := "http://127.0.0.1:" + strconv.Itoa(trap.port()) + "/eureka/apps"
	otherURL := "http://127.0.0.3:" + strconv.Itoa(elsewhere.port()) + "/health"

	cases := []struct {
		name    string
		allowed []netip.Prefix
		mutate  func(in *registry.Instance)
		want    string // in the refusal
	}{
		{"url at another host", loopbackOnly, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "127.0.0.2", otherURL
		}, "neither the instance's ipAddr nor its hostName"},
		{"url host is a name that is not the instance's", loopbackOnly, func(in *registry.Instance) {
			in.IPAddr, in.HostName, in.HealthCheckURL = "127.0.0.2", "app.example", "http://localhost:"+strconv.Itoa(trap.port())+"/"
		}, "neither the instance's ipAddr"},
		{"cloud metadata service", nil, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "169.254.169.254", "http://169.254.169.254/latest/meta-data/"
		}, "link-local"},
		{"metadata service as the tcp target", nil, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "169.254.169.254", ""
			in.Metadata = registry.NewMetadata(map[string]string{healthcheck.MetadataKey: "tcp"})
		}, "link-local"},
		{"link-local v6", nil, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "fe80::1", "http://[fe80::1]:8080/health"
		}, "link-local"},
		{"the node's own listener, loopback allowed", loopbackOnly, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "127.0.0.1", trapURL
		}, "own listener"},
		{"loopback, not allowed", nil, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "127.0.0.1", "http://127.0.0.1:"+strconv.Itoa(elsewhere.port())+"/"
		}, "loopback"},
		{"mapped loopback, not allowed", nil, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "::ffff:127.0.0.1", "http://[::ffff:127.0.0.1]:"+strconv.Itoa(elsewhere.port())+"/"
		}, "loopback"},
		{"the node's own address", nil, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "192.0.2.7", "http://192.0.2.7:9/"
		}, "own address"},
		{"credentials in the url", loopbackOnly, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "127.0.0.3", "http://admin:secret@127.0.0.3:"+strconv.Itoa(elsewhere.port())+"/"
		}, "credentials"},
		{"outside allowed-cidrs", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "127.0.0.3", otherURL
		}, "outside"},
		{"ipAddr is a name", loopbackOnly, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "localhost", "http://localhost:"+strconv.Itoa(trap.port())+"/"
		}, "not an IP address"},
		{"not http", loopbackOnly, func(in *registry.Instance) {
			in.IPAddr, in.HealthCheckURL = "127.0.0.3", "file:///etc/passwd"
		}, "not an http(s) URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg, _, chk := newSingle(t, func(c *healthcheck.Config) { c.AllowedCIDRs = tc.allowed }, healthcheck.Options{
				OwnAddrs: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("192.0.2.7")} },
				OwnPorts: func() []uint16 { return []uint16{uint16(trap.port())} },
			})
			in := registrytest.NewInstance("SVC", "x")
			in.HostName = "svc-host"
			in.Port = registry.Port{Number: 8080, Enabled: true}
			tc.mutate(in)
			if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				res := round(chk)
				if res.Refused != 1 || res.Probed != 0 {
					t.Fatalf("round: refused %d probed %d, want 1 and 0", res.Refused, res.Probed)
				}
			}
			if healthcheck.Dials(chk) != 0 {
				t.Fatalf("%d connections attempted, want none", healthcheck.Dials(chk))
			}
			rep, ok := chk.Probe("SVC", "x")
			if !ok || rep.State != "refused" || !strings.Contains(rep.LastResult, tc.want) {
				t.Fatalf("probe state %+v, want refused with %q", rep, tc.want)
			}
			if iv, _ := reg.Instance("SVC", "x"); iv.Status != registry.StatusUp || iv.Health != nil {
				t.Fatalf("a refused instance got status %s mark %v; it is flagged, never marked", iv.Status, iv.Health)
			}
		})
	}
	if n := trap.conns.Load() + elsewhere.conns.Load(); n != 0 {
		t.Fatalf("the counting listeners accepted %d connections, want 0", n)
	}
}

// An instance whose URL names its hostName is probed at its ipAddr, never
// at what the name resolves to; no DNS is asked.
func TestChecker_hostNameURLDialsIPAddr(t *testing.T) {
	b := newBackend(t)
	reg, _, chk := newSingle(t, nil, healthcheck.Options{})
	in := b.instance("SVC", "x")
	in.HostName = "svc.invalid" // resolves nowhere
	in.HealthCheckURL = "http://svc.invalid:" + strconv.Itoa(int(b.addr.Port())) + "/health"
	if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	res := round(chk)
	if res.Probed != 1 || res.Failed != 0 || b.requests.Load() != 1 {
		t.Fatalf("probed %d failed %d, backend saw %d requests; want the ipAddr probed once", res.Probed, res.Failed, b.requests.Load())
	}
}

func TestChecker_tcpAndModes(t *testing.T) {
	b := newBackend(t)
	reg, clk, chk := newSingle(t, func(c *healthcheck.Config) { c.Apps = nil }, healthcheck.Options{})
	tcp := b.instance("TCPAPP", "t")
	tcp.Metadata = registry.NewMetadata(map[string]string{healthcheck.MetadataKey: "tcp"})
	off := b.instance("SVC", "off") // not in Apps, no metadata
	if _, err := reg.Apply(registry.RegisterOp(tcp)); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Apply(registry.RegisterOp(off)); err != nil {
		t.Fatal(err)
	}
	res := round(chk)
	if res.Probed != 1 || res.Failed != 0 || b.requests.Load() != 0 {
		t.Fatalf("probed %d failed %d requests %d, want one TCP probe and no HTTP request", res.Probed, res.Failed, b.requests.Load())
	}
	// The port closes: TCP fails, and the single instance app is guarded
	// unless the guard is off; with max-down-percent 100 it goes DOWN.
	_ = b.srv.Close()
	for range 3 {
		clk.Advance(10e9)
		if r := round(chk); len(r.Guarded) != 1 {
			t.Fatalf("guarded %v, want TCPAPP (its only instance fails)", r.Guarded)
		}
	}
	if iv, _ := reg.Instance("TCPAPP", "t"); iv.Status != registry.StatusUp {
		t.Fatalf("guarded single instance is %s, want UP", iv.Status)
	}
}

func TestChecker_singleInstanceWithoutGuardAndRedirects(t *testing.T) {
	b := newBackend(t)
	reg, clk, chk := newSingle(t, func(c *healthcheck.Config) { c.MaxDownPercent = 100 }, healthcheck.Options{})
	in := b.instance("SVC", "x")
	in.HealthCheckURL = "http://127.0.0.1:" + strconv.Itoa(int(b.addr.Port())) + "/redirect"
	b.redirect.Store(true)
	if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Advance(10e9)
		round(chk)
	}
	iv, _ := reg.Instance("SVC", "x")
	if iv.Status != registry.StatusDown || iv.Health == nil || iv.Health.Reason != "http 302" {
		t.Fatalf("a redirecting health URL: %s %+v, want DOWN for http 302 (redirects are not followed)", iv.Status, iv.Health)
	}
}

func TestOwner_spreadsAppsAndMovesOnlyTheLeaversShare(t *testing.T) {
	members := []string{"a", "b", "c"}
	rng := rand.New(rand.NewPCG(1, 2))
	count := map[string]int{}
	moved, total := 0, 3000
	for i := range total {
		key := registry.InstanceKey{App: "APP-" + strconv.Itoa(i) + "-" + strconv.Itoa(rng.IntN(1000)), ID: "x"}
		o := healthcheck.Owner(members, key)
		count[o]++
		if o2 := healthcheck.Owner([]string{"a", "c"}, key); o2 != o {
			moved++
			if o != "b" {
				t.Fatalf("%s moved from %s to %s when b left", key, o, o2)
			}
		}
	}
	for _, m := range members {
		if count[m] < total/3*8/10 || count[m] > total/3*12/10 {
			t.Errorf("member %s owns %d of %d apps: uneven", m, count[m], total)
		}
	}
	if moved != count["b"] {
		t.Errorf("moved %d, want b's %d", moved, count["b"])
	}
	if healthcheck.Owner(nil, registry.InstanceKey{App: "X"}) != "" {
		t.Error("no members: want no owner")
	}
}

// HTTPS: the secure URL when the secure port is enabled, the certificate
// not verified, no client certificate offered, and nothing more sent than
// the request line and four headers.
func TestChecker_httpsOffersNoClientCertificate(t *testing.T) {
	var sawCert, sawAuth atomic.Bool
	var requests atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		sawCert.Store(sawCert.Load() || len(r.TLS.PeerCertificates) > 0)
		sawAuth.Store(sawAuth.Load() || r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "")
		if r.Host != "svc-host:"+strings.Split(r.Host, ":")[1] || r.URL.RequestURI() != "/health?deep=1" {
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	port := netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()

	reg, _, chk := newSingle(t, nil, healthcheck.Options{})
	in := registrytest.NewInstance("SVC", "x")
	in.IPAddr, in.HostName = "127.0.0.1", "svc-host"
	in.Port = registry.Port{Number: 1, Enabled: true}
	in.SecurePort = registry.Port{Number: int(port), Enabled: true}
	in.HealthCheckURL = "http://127.0.0.1:1/wrong"
	in.SecureHealthCheckURL = "https://svc-host:" + strconv.Itoa(int(port)) + "/health?deep=1"
	if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	res := round(chk)
	if res.Probed != 1 || res.Failed != 0 || requests.Load() != 1 {
		rep, _ := chk.Probe("SVC", "x")
		t.Fatalf("probed %d failed %d requests %d (%+v), want one passing HTTPS probe", res.Probed, res.Failed, requests.Load(), rep)
	}
	if sawCert.Load() || sawAuth.Load() {
		t.Fatal("the probe offered a client certificate or credentials")
	}
}

// newWithoutCluster is a checker of node n1 without a gossip cluster,
// over a registry on a moved clock.
func newWithoutCluster(t *testing.T, set func(*healthcheck.Config)) (*registry.Registry, *registrytest.Clock, *healthcheck.Checker) {
	t.Helper()
	clk := registrytest.NewClock()
	rcfg := registry.DefaultConfig()
	rcfg.Now = clk.Now
	reg, err := registry.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, clk.Now)
	set(&cfg)
	chk, err := healthcheck.New(cfg, healthcheck.Options{Registry: reg, Self: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return reg, clk, chk
}

// Without a gossip cluster a node probes the instances whose clients
// register and renew through it, not those a peer replicated to it.
func TestChecker_withoutClusterProbesItsOwnClients(t *testing.T) {
	b := newBackend(t)
	reg, _, chk := newWithoutCluster(t, func(*healthcheck.Config) {})
	if _, err := reg.Apply(registry.RegisterOp(b.instance("SVC", "mine"))); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Apply(registry.RegisterOp(b.instance("SVC", "peers")).From(registry.OriginPeer)); err != nil {
		t.Fatal(err)
	}
	res := round(chk)
	if res.Probed != 1 || b.requests.Load() != 1 {
		t.Fatalf("probed %d, requests %d: want only the instance whose client talks to this node", res.Probed, b.requests.Load())
	}
	if _, ok := chk.Probe("SVC", "mine"); !ok {
		t.Fatal("own client's instance not probed")
	}
	if chk.OwnerOf(registry.InstanceKey{App: "SVC", ID: "peers"}) != "" || chk.OwnerOf(registry.InstanceKey{App: "SVC", ID: "mine"}) != "n1" {
		t.Error("OwnerOf does not follow the client-live rule")
	}
	if !strings.Contains(chk.Report().Ownership, "clients register and renew through it") {
		t.Errorf("ownership %q does not say the rule", chk.Report().Ownership)
	}
}

// An endpoint that accepts and never answers fails by the timeout.
func TestChecker_timeout(t *testing.T) {
	silent := newCounter(t, "127.0.0.1:0") // accepts and closes at once: reset or EOF
	reg, _, chk := newSingle(t, func(c *healthcheck.Config) { c.Timeout = 300 * time.Millisecond; c.MaxDownPercent = 100 }, healthcheck.Options{})
	in := registrytest.NewInstance("SVC", "closing")
	in.IPAddr, in.HostName = "127.0.0.1", "localhost"
	in.HealthCheckURL = "http://127.0.0.1:" + strconv.Itoa(silent.port()) + "/health"
	if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn // never answered; the accept loop alone touches it until it ends
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		ln.Close()
		<-done
		for _, c := range held {
			c.Close()
		}
	}()
	in2 := registrytest.NewInstance("SVC", "silent")
	in2.IPAddr, in2.HostName = "127.0.0.1", "localhost"
	in2.HealthCheckURL = "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + "/health"
	if _, err := reg.Apply(registry.RegisterOp(in2)); err != nil {
		t.Fatal(err)
	}
	res := round(chk)
	if res.Failed != 2 {
		t.Fatalf("failed %d of %d, want both", res.Failed, res.Probed)
	}
	rep, _ := chk.Probe("SVC", "silent")
	if rep.LastResult != "http timeout" {
		t.Errorf("silent endpoint: %q, want http timeout", rep.LastResult)
	}
	rep, _ = chk.Probe("SVC", "closing")
	if rep.LastResult != "http connection reset" {
		t.Errorf("closing endpoint: %q, want http connection reset", rep.LastResult)
	}
}

// A persistent instance is probed though no muster.health-check.apps
// lists its app, unless it opts out; without a gossip cluster the node it
// registered through probes it for as long as it is registered, although
// it never renews.
func TestChecker_persistentProbedByDefault(t *testing.T) {
	b := newBackend(t)
	reg, clk, chk := newWithoutCluster(t, func(c *healthcheck.Config) { c.Apps = nil })
	for id, md := range map[string]map[string]string{
		"persistent": {registry.LeaseMetadataKey: "persistent"},
		"opted-out":  {registry.LeaseMetadataKey: "persistent", healthcheck.MetadataKey: "off"},
		"ordinary":   nil,
	} {
		in := b.instance("DB", id)
		in.Metadata = registry.NewMetadata(md)
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour) // many renewal intervals, no heartbeat
	res := round(chk)
	if res.Probed != 1 || b.requests.Load() != 1 {
		t.Fatalf("probed %d, requests %d: want the persistent instance alone", res.Probed, b.requests.Load())
	}
	if _, ok := chk.Probe("DB", "persistent"); !ok {
		t.Fatal("the persistent instance is not probed")
	}
}

// With checks off (muster.health-check.enabled false) the checker probes
// persistent instances alone, ignoring Apps and the metadata opt-in; and a
// persistent instance alone in its app goes DOWN on its own failures,
// where the guard holds an ordinary lone instance UP (TestChecker_tcpAndModes).
func TestChecker_checksOff_persistentOnlyAndUnguarded(t *testing.T) {
	b := newBackend(t)
	reg, clk, chk := newSingle(t, func(c *healthcheck.Config) { c.Enabled, c.Apps = false, []string{"*"} }, healthcheck.Options{})
	if res := round(chk); res.Probed != 0 {
		t.Fatalf("an empty registry: probed %d", res.Probed)
	}
	for id, md := range map[string]map[string]string{
		"db":       {registry.LeaseMetadataKey: "persistent"},
		"opted-in": {healthcheck.MetadataKey: "http"},
	} {
		in := b.instance(strings.ToUpper(id), id)
		in.Metadata = registry.NewMetadata(md)
		if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	if res := round(chk); res.Probed != 1 || b.requests.Load() != 1 {
		t.Fatalf("probed %d, requests %d: want the persistent instance alone", res.Probed, b.requests.Load())
	}
	b.healthy.Store(false)
	for range 3 {
		clk.Advance(10e9)
		if r := round(chk); len(r.Guarded) != 0 {
			t.Fatalf("guarded %v: a persistent instance is outside the guard", r.Guarded)
		}
	}
	if iv, _ := reg.Instance("DB", "db"); iv.Status != registry.StatusDown {
		t.Fatalf("the failing persistent instance is %s, want DOWN", iv.Status)
	}
	if r := chk.Report(); r.Enabled {
		t.Fatal("report says enabled with checks off")
	}
}
