package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/node"
	"github.com/muster-registry/muster/settings"
)

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

// freeTCPPort is a loopback port free a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// mustLoad loads settings as serve does, failing the test on an error.
func mustLoad(t *testing.T, file string, env, sets []string) *settings.Settings {
	t.Helper()
	s, _, err := settings.LoadSettings(file, env, sets)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startNode starts a node of sets on loopback (gossip off unless sets turn
// it on, with memberlist's fast local timings) and waits until it opens.
func startNode(t *testing.T, name string, sets ...string) *node.Node {
	t.Helper()
	base := []string{"eureka.client.register-with-eureka=false", "server.port=0", "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"cluster.node-name=" + name, "cluster.bind-addr=127.0.0.1", "cluster.bind-port=0",
		"eureka.server.registry-sync-retry-wait-ms=200"}
	s := mustLoad(t, "", nil, append(base, sets...))
	return startSettings(t, name, s)
}

// startSettings starts a node of loaded settings and waits until it opens.
func startSettings(t *testing.T, name string, s *settings.Settings) *node.Node {
	t.Helper()
	n, err := node.New(s, testLogger(t).With().Str("node", name).Logger(), node.Options{Memberlist: memberlist.DefaultLocalConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
	select {
	case <-n.Opened():
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s did not open for traffic", name)
	}
	return n
}

// register posts an instance of app to n with a 90 s lease.
func register(t *testing.T, n *node.Node, app, id string) {
	t.Helper()
	body := `{"instance":{"instanceId":"` + id + `","hostName":"127.0.0.1","app":"` + app + `","ipAddr":"127.0.0.1","status":"UP",` +
		`"port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
		`"leaseInfo":{"durationInSecs":90}}}`
	resp, err := http.Post("http://"+n.Addr()+"/eureka/apps/"+app, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("register %s/%s: %d", app, id, resp.StatusCode)
	}
}
