package node

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/rs/zerolog"
)

// loopbackOnly is a host without a private IPv4 address.
func loopbackOnly() ([]net.Addr, error) {
	return []net.Addr{
		&net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)},
	}, nil
}

// On a host without a private IPv4 address, a node whose settings ask
// nothing of gossip (a Spring server's file) starts with gossip off and
// one warning; with cluster.join it gossips on another address.
func TestNode_noPrivateIPv4(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sets   []string
		gossip bool
	}{
		{"nothing asks for gossip: off", nil, false},
		{"cluster.join asks: another address", []string{"cluster.join=127.0.0.1:1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs testlog.Buffer
			s := mustLoad(t, "", nil, append([]string{"server.port=0", "server.address=127.0.0.1", "cluster.bind-port=0",
				"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1", "cluster.node-name=np",
				"eureka.server.registry-sync-retries=1"}, tc.sets...))
			n, err := New(s, zerolog.New(&logs), Options{Memberlist: memberlist.DefaultLocalConfig(), InterfaceAddrs: loopbackOnly})
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Start(context.Background()); err != nil {
				t.Fatalf("start on a host without a private IPv4 address: %v", err)
			}
			defer n.Shutdown(context.Background())
			waitOpened(t, n)
			if got := n.cluster != nil; got != tc.gossip {
				t.Fatalf("gossip running: %v, want %v", got, tc.gossip)
			}
			if code, _, err := httpGet("http://" + n.Addr() + "/livez"); err != nil || code != 200 {
				t.Errorf("/livez: %d %v", code, err)
			}
			warnings := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, `"level":"warn"`) && (strings.Contains(line, "gossip is off") || strings.Contains(line, "gossip: ")) {
					warnings++
				}
			}
			if warnings != 1 {
				t.Errorf("%d warnings about gossip, want 1:\n%s", warnings, logs.String())
			}
			if tc.gossip && !strings.HasPrefix(n.GossipAddr(), "127.0.0.1:") {
				t.Errorf("gossip address %s, want loopback", n.GossipAddr())
			}
		})
	}
}
