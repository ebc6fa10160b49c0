package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testlog"
	"github.com/muster-registry/muster/internal/testwait"
)

// TestDNSWithHAProxy runs Debian's HAProxy as a user would: a resolvers
// section pointed at a node's DNS port and a backend of server-template
// slots over _orders._tcp.app.muster. SRV records. Instances registered
// over the Eureka API are loopback HTTP servers started here; the test
// proxies real requests through HAProxy and checks that its backends
// follow registrations, a cancel, an operator's OUT_OF_SERVICE, a client's
// DOWN and their reversal, each within the TTL plus HAProxy's hold time.
func TestDNSWithHAProxy(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed (Debian package haproxy; scripts/test.sh installs it)")
	}
	const ttl = 2 // seconds, muster.dns.ttl-seconds
	n := startTestNode(t, "dnsha", "z1", nil, "muster.dns.enabled=true", "muster.dns.addr=127.0.0.1:0",
		"muster.dns.ttl-seconds="+strconv.Itoa(ttl))
	waitOpened(t, n)

	// Each instance is a host of its own (127.0.0.11, .12, ...), as in a
	// real fleet; its HTTP server answers with the instance id.
	backends := map[string]*httptest.Server{}
	for i, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", 11+i))
		if err != nil {
			t.Skipf("cannot listen on another loopback address: %v", err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, id) }))
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		backends[id] = srv
	}
	register := func(id, status string) {
		t.Helper()
		addr := backends[id].Listener.Addr().(*net.TCPAddr)
		body := fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"h-%s","app":"ORDERS","ipAddr":%q,"status":%q,
"port":{"$":%d,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":600},"vipAddress":"orders"}}`, id, id, addr.IP.String(), status, addr.Port)
		if code := call(t, "POST", n.URL()+"apps/ORDERS", body); code != 204 {
			t.Fatalf("register %s %s: %d", id, status, code)
		}
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		register(id, "UP")
	}

	// hold obsolete: how long HAProxy keeps a server whose SRV record has
	// gone; timeout resolve: how often it asks.
	const holdObsolete, resolveEvery = 1 * time.Second, 1 * time.Second
	front := freeTCPPort(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "admin.sock")
	cfg := fmt.Sprintf(`global
  stats socket %s mode 600 level admin
defaults
  mode http
  timeout connect 1s
  timeout client 5s
  timeout server 5s
resolvers muster
  nameserver node %s
  accepted_payload_size 1232
  resolve_retries 3
  timeout resolve %dms
  timeout retry 500ms
  hold valid 10s
  hold obsolete %dms
  hold nx %dms
frontend web
  bind 127.0.0.1:%d
  default_backend orders
backend orders
  balance roundrobin
  server-template orders 6 _orders._tcp.app.muster. resolvers muster resolve-prefer ipv4 init-addr none
`, sock, n.dnsListen(), resolveEvery.Milliseconds(), holdObsolete.Milliseconds(), holdObsolete.Milliseconds(), front)
	cfgFile := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", cfgFile).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	cmd := exec.Command(haproxy, "-db", "-f", cfgFile)
	var logs testlog.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", logs.String())
		}
	})

	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// served sends a round of requests through HAProxy and returns the
	// instances that answered, sorted.
	served := func() ([]string, error) {
		seen := map[string]bool{}
		for range 12 {
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", front))
			if err != nil {
				return nil, err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				seen[string(b)] = true
			}
		}
		out := make([]string, 0, len(seen))
		for id := range seen {
			out = append(out, id)
		}
		slices.Sort(out)
		return out, nil
	}
	// Within the TTL plus HAProxy's hold and resolve interval, with slack
	// for a loaded machine.
	bound := ttl*time.Second + holdObsolete + resolveEvery + 5*time.Second
	expect := func(what string, want ...string) {
		t.Helper()
		start := time.Now()
		testwait.For(t, bound, what, func() error {
			got, err := served()
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("HAProxy served %v, want %v; servers:\n%s", got, want, serversState(sock))
			}
			return nil
		})
		// And it stays so: no stale server comes back.
		if got, err := served(); err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: then served %v (%v), want %v", what, got, err, want)
		}
		t.Logf("%s: %v after %v", what, want, time.Since(start).Round(10*time.Millisecond))
	}

	expect("the three registered instances", "o-1", "o-2", "o-3")
	register("o-4", "UP")
	expect("a new registration", "o-1", "o-2", "o-3", "o-4")
	if code := call(t, "DELETE", n.URL()+"apps/ORDERS/o-1", ""); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	expect("a cancel", "o-2", "o-3", "o-4")
	if code := call(t, "PUT", n.URL()+"apps/ORDERS/o-2/status?value=OUT_OF_SERVICE", ""); code != 200 {
		t.Fatalf("OUT_OF_SERVICE: %d", code)
	}
	expect("an operator's OUT_OF_SERVICE", "o-3", "o-4")
	register("o-3", "DOWN")
	expect("a client's DOWN", "o-4")
	if code := call(t, "DELETE", n.URL()+"apps/ORDERS/o-2/status?value=UP", ""); code != 200 {
		t.Fatalf("remove override: %d", code)
	}
	register("o-3", "UP")
	expect("the override removed and the client UP again", "o-2", "o-3", "o-4")
}

// serversState is HAProxy's own view of the backend (its stats socket's
// "show servers state"), for failure messages.
func serversState(sock string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c, "show servers state orders\n")
	var b strings.Builder
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 18 && !strings.HasPrefix(f[0], "#") {
			// name, address, operational and admin state, port, fqdn
			fmt.Fprintf(&b, "  %s %s op=%s admin=%s port=%s fqdn=%s\n", f[3], f[4], f[5], f[6], f[18], f[17])
		}
	}
	return b.String()
}
