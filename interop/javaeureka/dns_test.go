package javaeureka

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dnsAddr is the loopback address the node's DNS listens on for the Java
// client: JNDI's DNS provider (what Eureka's DnsResolver uses, with the
// provider URL "dns:" hard-coded) asks the servers of /etc/resolv.conf on
// port 53, and resolv.conf has no port. So the node serves 53 on an
// address of its own, and the Java process alone sees a resolv.conf that
// names it (a private mount namespace; the machine's file is untouched).
const dnsAddr = "127.0.83.1"

// javaDNSPrereqs skips unless the test can serve port 53 and give the JVM
// a resolv.conf of its own.
func javaDNSPrereqs(t *testing.T) (unshare string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the Java client's resolver asks port 53 and its resolv.conf is bind-mounted in a private mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare (util-linux) for a private mount namespace")
	}
	if out, err := exec.Command(unshare, "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare -m not permitted here: %v %s", err, out)
	}
	for _, network := range []string{"udp", "tcp"} {
		var c interface{ Close() error }
		var err error
		if network == "udp" {
			c, err = net.ListenPacket("udp", dnsAddr+":53")
		} else {
			c, err = net.Listen("tcp", dnsAddr+":53")
		}
		if err != nil {
			t.Skipf("cannot serve %s %s:53: %v", network, dnsAddr, err)
		}
		c.Close()
	}
	return unshare
}

// TestJavaClient_dnsServerDiscovery: the real DiscoveryClient with
// eureka.shouldUseDns=true (Spring: use-dns-for-fetching-service-urls)
// finds the Muster node through the node's own TXT records:
// txt.us-east-1.muster → "z1.muster", txt.z1.muster → the node's host. The
// node advertises itself as "localhost" while the driver's --url (its own
// raw requests) says 127.0.0.1, so requests to localhost can only have
// come from the URL the client built out of DNS. It then registers,
// heartbeats, fetches and cancels there as in TestJavaClient_againstMuster.
func TestJavaClient_dnsServerDiscovery(t *testing.T) {
	dir := javaEureka(t)
	unshare := javaDNSPrereqs(t)
	url := startNode(t, "eureka.instance.hostname=localhost", "cluster.zone=z1",
		"muster.dns.enabled=true", "muster.dns.addr="+dnsAddr+":53", "muster.dns.region=us-east-1")
	port := regexp.MustCompile(`:(\d+)/`).FindStringSubmatch(url)[1]

	resolvConf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("nameserver "+dnsAddr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// run.sh inside a mount namespace whose /etc/resolv.conf names the node.
	inNamespace := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, unshare, append([]string{"-m", "--propagation", "private", "sh", "-c",
			`mount --bind "$0" /etc/resolv.conf && exec "$@"`, resolvConf, name}, args...)...)
	}
	out := runDriverCmd(t, inNamespace, dir, url, nil,
		"--app", "JAVA-DNS", "--port", "19753", "--steady", "5", "--raw", "false",
		"--eureka.shouldUseDns=true", "--eureka.eurekaServer.domainName=muster",
		"--eureka.eurekaServer.port="+port, "--eureka.eurekaServer.context=eureka",
		"--eureka.region=us-east-1")
	if !strings.Contains(out, "Resolving eureka endpoints via DNS: txt.us-east-1.muster") {
		t.Errorf("the client did not resolve its servers through DNS:\n%s", tail([]byte(out), 3000))
	}
	// The client's own log line joins its service URL and the path as
	// strings (".../eurekaapps/..."); Jersey puts the slash in the request.
	for _, want := range []string{
		`Jersey HTTP POST http://localhost:` + port + `/eureka/?apps/JAVA-DNS with instance [^;]*; statusCode=204`,
		`Jersey HTTP GET http://localhost:` + port + `/eureka/?apps/\?; statusCode=200`,
		`Jersey HTTP PUT http://localhost:` + port + `/eureka/?apps/JAVA-DNS/[^;]*; statusCode=200`,
		`Jersey HTTP GET http://localhost:` + port + `/eureka/?apps/delta\?; statusCode=200`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %q: the client did not use the URL built from the TXT records", want)
		}
	}
	if t.Failed() {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "Jersey HTTP") || strings.Contains(l, "resolver") || strings.Contains(l, "Resolv") {
				lines = append(lines, l)
			}
		}
		t.Logf("the client's requests and resolver lines:\n%s", strings.Join(lines[:min(len(lines), 60)], "\n"))
	}
}
