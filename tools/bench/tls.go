package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/muster-registry/muster/tlsconfig"
	"github.com/muster-registry/muster/tools/loadgen"
)

// heartbeatTLS measures renewals on a node serving TLS with
// server.ssl.client-auth need (the secured compose cluster's setting)
// beside open, a node without TLS that already holds the same fleet, in one
// run with the same requests. Each load connection does one handshake
// before the clock starts and is then kept alive, as Eureka clients keep
// theirs, so the ratio is what encryption costs per request.
func (e heartbeatBench) heartbeatTLS(open *benchChild, n int) error {
	dir := filepath.Join(e.tmpDir, "tls")
	clientTLS, sets, err := benchCerts(dir)
	if err != nil {
		return err
	}
	secured, err := e.startChild("heartbeat-tls", "muster", sets...)
	if err != nil {
		return err
	}
	secured.clientTLS = clientTLS
	f := benchFleetOf(n)
	res, err := e.load(secured, loadgen.Config{Total: uint64(n), Next: func(w int, seq uint64) loadgen.Request {
		return f.register(int(seq))
	}})
	if err != nil {
		return err
	}
	if res.NotOK() > 0 {
		return fmt.Errorf("registering %d instances over TLS: %d failed (statuses %v, first error %v)", n, res.NotOK(), res.Status, res.FirstErr)
	}
	// One config for both: load speaks TLS to the child that has a
	// clientTLS, plain HTTP to the open one.
	cfg := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(n)], Header: benchClientHeaders}
	}}
	m, o, err := e.compare(secured, open, cfg, nil)
	if err != nil {
		return err
	}
	e.addCompared("heartbeat", "renewals with TLS (client-auth need) beside open/s", m.res.RPS(), o.res.RPS(), "req/s", "", nil,
		"ceiling = the same node without TLS; keep-alive connections, ECDSA P-256; "+roundRatios(m, o))
	e.addCompared("heartbeat", "server CPU per renewal, TLS beside open", m.cpuPerReq(), o.cpuPerReq(), "µs", "", nil, "user+system CPU of the server process")
	if bad := m.res.NotOK(); bad > 0 {
		e.add(benchRow{Scenario: "heartbeat", Figure: "failed requests with TLS", Value: float64(bad), Target: "0", Met: benchBool(false),
			Note: fmt.Sprintf("statuses %v, first error %v", m.res.Status, m.res.FirstErr)})
	}
	return nil
}

// benchCerts writes a CA and a server and a client certificate for
// 127.0.0.1 (what `muster tls` makes) into dir, and returns the load
// generator's TLS config and the node's --set arguments.
func benchCerts(dir string) (*tls.Config, []string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	caCert, caKey, err := tlsconfig.NewCA(tlsconfig.CAOptions{CommonName: "bench CA"})
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{"ca.pem": caCert}
	var client tls.Certificate
	for _, name := range []string{"node", "client"} {
		c, k, err := tlsconfig.NewCert(tlsconfig.CertOptions{Name: name, IPs: []net.IP{net.ParseIP("127.0.0.1")}, CACert: caCert, CAKey: caKey})
		if err != nil {
			return nil, nil, err
		}
		files[name+".pem"], files[name+"-key.pem"] = c, k
		if name == "client" {
			if client, err = tls.X509KeyPair(c, k); err != nil {
				return nil, nil, err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, nil, err
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caCert)
	sets := []string{
		"--set", "server.ssl.certificate=" + filepath.Join(dir, "node.pem"),
		"--set", "server.ssl.certificate-private-key=" + filepath.Join(dir, "node-key.pem"),
		"--set", "server.ssl.trust-certificate=" + filepath.Join(dir, "ca.pem"),
		"--set", "server.ssl.client-auth=need",
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{client}, MinVersion: tls.VersionTLS12}, sets, nil
}
