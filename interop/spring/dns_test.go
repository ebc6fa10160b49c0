package spring

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/muster-registry/muster/interop/interoptest"
)

// dnsAddr is the loopback address the node's DNS listens on for the Java
// clients: eureka-client's DnsResolver asks through JNDI with the provider
// URL "dns:" hard-coded (1.10 and 2.0 alike), which asks the servers of
// /etc/resolv.conf on port 53, and resolv.conf has no port. So the node
// serves 53 on an address of its own, and the JVM alone sees a resolv.conf
// that names it (a private mount namespace; the machine's file is
// untouched).
const dnsAddr = "127.0.83.1"

// dnsPrereqs skips unless the test can serve port 53 and give the JVM a
// resolv.conf of its own.
func dnsPrereqs(t *testing.T) (unshare string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root: the Java client's resolver asks port 53 and its resolv.conf is bind-mounted in a private mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("SKIP: no unshare (util-linux) for a private mount namespace")
	}
	if out, err := exec.Command(unshare, "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("SKIP: unshare -m not permitted here: %v %s", err, out)
	}
	if c, err := net.ListenPacket("udp", dnsAddr+":53"); err != nil {
		t.Skipf("SKIP: cannot serve udp %s:53: %v", dnsAddr, err)
	} else {
		c.Close()
	}
	if c, err := net.Listen("tcp", dnsAddr+":53"); err != nil {
		t.Skipf("SKIP: cannot serve tcp %s:53: %v", dnsAddr, err)
	} else {
		c.Close()
	}
	return unshare
}

// TestClients_dnsServerDiscovery: eureka-client 2.0 on its own (eureka.
// shouldUseDns) and a Spring Boot 4 app (eureka.client.use-dns-for-
// fetching-service-urls) find the Muster node through the node's own TXT
// records (txt.us-east-1.muster → "z1.muster", txt.z1.muster → the node's
// host, "localhost"), and register, heartbeat, fetch and cancel there.
// Their service URL names a port nobody listens on and the DNS answer
// carries no port: each client's server port is its own WireTap's, so an
// exchange on a tap can only come from a URL built out of the TXT records.
func TestClients_dnsServerDiscovery(t *testing.T) {
	drivers := []struct {
		c    client
		sets func(port int) []string
	}{
		{clients[4], func(port int) []string {
			return []string{"--archaius.eureka.shouldUseDns=true", "--archaius.eureka.eurekaServer.domainName=muster",
				"--archaius.eureka.eurekaServer.port=" + strconv.Itoa(port), "--archaius.eureka.eurekaServer.context=eureka",
				"--archaius.eureka.region=us-east-1"}
		}},
		{clients[0], func(port int) []string {
			return []string{"--eureka.client.use-dns-for-fetching-service-urls=true", "--eureka.client.eureka-server-d-n-s-name=muster",
				"--eureka.client.eureka-server-port=" + strconv.Itoa(port), "--eureka.client.eureka-server-u-r-l-context=eureka",
				"--eureka.client.region=us-east-1"}
		}},
	}
	for _, d := range drivers {
		interoptest.Built(t, interoptest.Source(t, d.c.src)) // skips here, before any node starts
	}
	unshare := dnsPrereqs(t)
	node := interoptest.NewNode(t, "eureka.instance.hostname=localhost", "cluster.zone=z1",
		"muster.dns.enabled=true", "muster.dns.addr="+dnsAddr+":53", "muster.dns.region=us-east-1").Start()

	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("nameserver "+dnsAddr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadURL := "http://127.0.0.1:1/eureka/" // nobody listens on port 1
	for _, d := range drivers {
		d := d
		t.Run(d.c.name, func(t *testing.T) {
			t.Parallel()
			takeJVMSlot(t)
			c := d.c
			// The JVM in a mount namespace whose /etc/resolv.conf names the node.
			c.wrap = []string{unshare, "-m", "--propagation", "private", "sh", "-c",
				`mount --bind "$0" /etc/resolv.conf && exec "$@"`, resolvConf}
			tap := interoptest.NewWireTap(t, node.Base())
			var a *app
			logWire(t, tap, func() *app { return a })
			_, tapPort, _ := net.SplitHostPort(tap.URL()[len("http://"):])
			port, _ := strconv.Atoi(tapPort)
			a = startApp(t, c, c.name+"-dns", []string{deadURL}, nil, d.sets(port)...)
			waitOnNode(t, node, tap, 0, a, "registered UP through the URL from DNS", nodeStatusIs("UP"))
			if len(a.proc.Out.Match(0, `Resolving eureka endpoints via DNS: txt\.us-east-1\.muster`)) == 0 {
				t.Errorf("the client did not log that it resolves its servers through DNS")
			}
			mustSee(t, tap, 0, "POST", appPath(a, ""), ok204, "the registration")
			mustSee(t, tap, 0, "GET", `^/eureka/apps/?$`, ok200, "the full fetch")
			mustSee(t, tap, 0, "GET", `^/eureka/apps/delta$`, ok200, "a delta fetch")
			mustSee(t, tap, 0, "PUT", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "a heartbeat")
			a.waitSees(a.App, a.ID, "itself UP, fetched through the URL from DNS", statusIs("UP"))
			mark := tap.Len()
			a.Stop()
			mustSee(t, tap, mark, "DELETE", appPath(a, "/"+regexp.QuoteMeta(a.ID)), ok200, "the cancel at shutdown")
			waitGoneFromNode(t, node, node.URL(), tap, mark, a, "cancelled at shutdown")
			noErrors(t, tap, c.name)
		})
	}
}
