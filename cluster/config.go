package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"
)

// Config configures one cluster member. Build it with DefaultConfig, change
// what you need and check it with Validate (New does too).
type Config struct {
	// NodeName identifies this node in the cluster and must be unique: peers
	// and self detection go by name, never by host name. Default: os.Hostname().
	NodeName string

	// BindAddr is the IP address gossip listens on (UDP and TCP). Default
	// "0.0.0.0", every interface.
	BindAddr string

	// BindPort is the gossip port (UDP and TCP). Default 7946, memberlist's
	// and Serf's port. 0 picks a free port, which only suits tests: peers
	// cannot find a port they do not know.
	BindPort int

	// AdvertiseAddr is the IP address peers use to reach this node. "" lets
	// memberlist choose: the bind address, or a private interface address when
	// bound to 0.0.0.0. Set it behind NAT or in containers.
	AdvertiseAddr string

	// AdvertisePort is the port peers use to reach this node; 0 means the
	// bound port.
	AdvertisePort int

	// InterfaceAddrs lists the host's addresses, for the advertise address
	// when memberlist finds no private IPv4 one (advertise.go). nil means
	// net.InterfaceAddrs; tests give a fake list.
	InterfaceAddrs func() ([]net.Addr, error)

	// Join lists seeds as host:port (host alone: this node's BindPort). Start keeps
	// trying them in the background until one answers, so nodes can start in
	// any order. Listing every node on every node is fine, self included.
	// Empty: this node waits for others to join it.
	Join []string

	// JoinRetryInterval is the first wait after a failed join attempt
	// (default 1 s). Each further failure doubles it, up to
	// JoinRetryMaxInterval (default 15 s): wait(n) = min(interval × 2^(n−1), max).
	// Shorter waits join sooner after the seeds come up, at the cost of more
	// connection attempts while they are down.
	JoinRetryInterval    time.Duration
	JoinRetryMaxInterval time.Duration

	// SecretKey is the AES key that encrypts and authenticates all gossip:
	// 16, 24 or 32 bytes (AES-128/192/256); see ParseSecretKey. Every node
	// needs the same key; nodes with different keys (or one with a key and one
	// without) cannot join each other. nil: no encryption, unless the
	// Memberlist base config brings its own keyring. Default nil.
	SecretKey []byte

	// SecretKeys are further keys accepted besides SecretKey, which alone
	// is used for sending: memberlist's keyring tries every key on what it
	// receives. Listing the next key on every node, then making it the
	// SecretKey on every node, then dropping the old one rotates the key
	// while the nodes keep talking (README, "Securing a cluster"). Each is
	// 16, 24 or 32 bytes; they need SecretKey. Default nil.
	SecretKeys [][]byte

	// Zone is this node's availability zone, gossiped to peers so that
	// replication and syncUp can prefer nearby nodes. Default "default".
	Zone string

	// EurekaURL is this node's advertised Eureka base URL, gossiped to
	// peers, e.g. "http://10.0.0.5:8761/eureka/". It must be reachable from
	// the other nodes. Empty is allowed (peers then see an empty URL and
	// cannot replicate to this node). Default "".
	EurekaURL string

	// RejoinInterval is how often, once joined, the node checks that it
	// still sees as many live peers as it has seeds and, when it does not,
	// joins the seeds and the members it last saw dead again. memberlist
	// forgets a dead node after GossipToTheDeadTime and never contacts it
	// again, so without this two sides of a partition that lasted longer
	// would stay apart after it heals. Default 10 s; a rejoin is one
	// push/pull exchange with each target.
	RejoinInterval time.Duration

	// ReconcileInterval is how often Start's background loop applies the
	// time-based changes memberlist reports to no delegate: it forgets dead
	// and left members once memberlist has reaped them (after
	// Memberlist.GossipToTheDeadTime) and lists a suspect peer as alive again
	// once its suspicion must have ended (see suspect.go). Default 1 s; each
	// pass is a scan of the member map, no I/O.
	ReconcileInterval time.Duration

	// Logger receives this package's events and memberlist's own log lines,
	// under component=cluster. The zero value logs nothing.
	Logger zerolog.Logger

	// Memberlist is the base memberlist configuration: protocol timings,
	// transport, compression. DefaultConfig uses memberlist.DefaultLANConfig();
	// tests use memberlist.DefaultLocalConfig() or a MockNetwork transport.
	// New copies it. Its Name, BindAddr, BindPort, AdvertiseAddr,
	// AdvertisePort, Delegate, Events, Ping, Logger and LogOutput are
	// replaced by the fields above and this package's delegates; its
	// SecretKey too when SecretKey is set.
	Memberlist *memberlist.Config
}

// DefaultConfig returns a Config with every knob set for a LAN cluster.
// Callers still set EurekaURL and usually Join.
func DefaultConfig() Config {
	host, _ := os.Hostname() // empty on error: Validate then names the field
	cfg := Config{
		NodeName:             host,                          // unique per node
		BindAddr:             "0.0.0.0",                     // all interfaces
		BindPort:             7946,                          // memberlist/Serf default
		AdvertiseAddr:        "",                            // memberlist picks
		AdvertisePort:        0,                             // the bound port
		Join:                 nil,                           // wait to be joined
		JoinRetryInterval:    time.Second,                   // first retry after 1 s
		JoinRetryMaxInterval: 15 * time.Second,              // then at most every 15 s
		SecretKey:            nil,                           // no encryption
		Zone:                 "default",                     // single zone
		EurekaURL:            "",                            // set by the caller
		RejoinInterval:       10 * time.Second,              // heal partitions within 10 s
		ReconcileInterval:    time.Second,                   // suspect shows within 1 s
		Logger:               zerolog.Nop(),                 // silent
		Memberlist:           memberlist.DefaultLANConfig(), // 1 s probes, 30 s push/pull
	}
	// memberlist compresses every message it sends with LZW, a new
	// compressor each time, and the messages of a settled cluster are
	// pings, acks and a few small broadcasts of tens of bytes: compressing
	// them was a quarter of an idle node's CPU (2.3 -> 1.75 ms/s in
	// tools/bench's three-node cluster). A node still reads compressed
	// messages, so it gossips with nodes that send them.
	cfg.Memberlist.EnableCompression = false
	// memberlist's gossip wakes the node every GossipInterval to send
	// what broadcasts wait, and a settled cluster has none: at the LAN
	// default (200 ms) those five wake-ups a second, each a few thread
	// switches, were about half of an idle node's CPU (~1.3 of ~2.7 ms/s,
	// issue 43; three bare memberlist processes: 2.0 ms/s each at 200 ms,
	// 0.7 at 1 s). Broadcasts also ride on every probe and ack, so a change
	// of membership still reaches a small cluster within a probe interval
	// (1 s); at 500 ms a leave waits ~0.25 s for its broadcast on average.
	cfg.Memberlist.GossipInterval = 500 * time.Millisecond
	return cfg
}

// Validate reports every problem in c, each naming the field and the value.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("cluster: "+format, args...))
	}

	if strings.TrimSpace(c.NodeName) == "" {
		bad("NodeName %q is empty: set a name unique in the cluster", c.NodeName)
	}
	if net.ParseIP(c.BindAddr) == nil {
		bad("BindAddr %q is not an IP address", c.BindAddr)
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		bad("BindPort %d is out of range [0, 65535]", c.BindPort)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		bad("AdvertiseAddr %q is not an IP address", c.AdvertiseAddr)
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		bad("AdvertisePort %d is out of range [0, 65535]", c.AdvertisePort)
	}
	for i, seed := range c.Join {
		if err := checkSeed(seed); err != nil {
			bad("Join[%d] %q: %v", i, seed, err)
		}
	}
	if len(c.Join) > 0 {
		if c.JoinRetryInterval <= 0 {
			bad("JoinRetryInterval %s must be positive", c.JoinRetryInterval)
		}
		if c.JoinRetryMaxInterval < c.JoinRetryInterval {
			bad("JoinRetryMaxInterval %s is shorter than JoinRetryInterval %s", c.JoinRetryMaxInterval, c.JoinRetryInterval)
		}
	}
	if c.SecretKey != nil {
		if err := checkKeyLen(len(c.SecretKey)); err != nil {
			bad("SecretKey: %v", err)
		}
	}
	if len(c.SecretKeys) > 0 && c.SecretKey == nil {
		bad("SecretKeys are set without a SecretKey to send with")
	}
	for i, k := range c.SecretKeys {
		if err := checkKeyLen(len(k)); err != nil {
			bad("SecretKeys[%d]: %v", i, err)
		}
	}
	if strings.TrimSpace(c.Zone) == "" {
		bad("Zone %q is empty", c.Zone)
	}
	if c.EurekaURL != "" {
		if u, err := url.Parse(c.EurekaURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("EurekaURL %q is not an absolute http(s) URL", c.EurekaURL)
		}
	}
	if c.RejoinInterval <= 0 {
		bad("RejoinInterval %s must be positive", c.RejoinInterval)
	}
	if c.ReconcileInterval <= 0 {
		bad("ReconcileInterval %s must be positive", c.ReconcileInterval)
	}
	if c.Memberlist == nil {
		bad("Memberlist is nil: start from memberlist.DefaultLANConfig()")
	}
	if meta, err := encodeMeta(nodeMeta{Zone: c.Zone, URL: c.EurekaURL, Leaving: true}); err != nil {
		bad("node metadata: %v", err)
	} else if len(meta) > memberlist.MetaMaxSize {
		bad("node metadata is %d bytes (Zone %q, EurekaURL %q), memberlist allows %d",
			len(meta), c.Zone, c.EurekaURL, memberlist.MetaMaxSize)
	}
	return errors.Join(errs...)
}

// checkSeed accepts "host" and "host:port" with a port in [1, 65535].
func checkSeed(seed string) error {
	if strings.TrimSpace(seed) == "" {
		return errors.New("empty seed")
	}
	_, port, err := net.SplitHostPort(seed)
	if err != nil {
		var aerr *net.AddrError
		if errors.As(err, &aerr) && aerr.Err == "missing port in address" {
			return nil // memberlist uses this node's BindPort
		}
		return fmt.Errorf("want host:port: %w", err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not in [1, 65535]", port)
	}
	return nil
}

func checkKeyLen(n int) error {
	switch n {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("key is %d bytes, want 16, 24 or 32 (AES-128, -192 or -256); generate one with: head -c 32 /dev/urandom | base64", n)
}

// ParseSecretKey decodes a standard base64 key (as `head -c 32 /dev/urandom
// | base64` prints it) and checks that it is 16, 24 or 32 bytes long. An
// empty string returns nil and no error: no encryption.
func ParseSecretKey(b64 string) ([]byte, error) {
	s := strings.TrimSpace(b64)
	if s == "" {
		return nil, nil
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("cluster: secret key is not valid base64: %w", err)
	}
	if err := checkKeyLen(len(key)); err != nil {
		return nil, fmt.Errorf("cluster: secret key: %w", err)
	}
	return key, nil
}
