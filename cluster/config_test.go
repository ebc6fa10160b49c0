package cluster_test

import (
	"context"
	"encoding/base64"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/cluster"
)

func validConfig() cluster.Config {
	cfg := cluster.DefaultConfig()
	cfg.NodeName = "node-1"
	cfg.EurekaURL = "http://10.0.0.5:8761/eureka/"
	return cfg
}

func TestDefaultConfig_Validate_ok(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	cfg := cluster.DefaultConfig()
	if cfg.BindAddr != "0.0.0.0" || cfg.BindPort != 7946 || cfg.Zone != "default" ||
		cfg.JoinRetryInterval != time.Second || cfg.JoinRetryMaxInterval != 15*time.Second ||
		cfg.ReconcileInterval != time.Second || cfg.Memberlist == nil {
		t.Errorf("DefaultConfig() = %+v", cfg)
	}
}

// The default gossip sends its small messages uncompressed (they cost
// more to compress than to send) and reads compressed ones.
func TestDefaultConfig_uncompressedGossip(t *testing.T) {
	if cluster.DefaultConfig().Memberlist.EnableCompression {
		t.Error("DefaultConfig compresses gossip")
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*cluster.Config)
		want   []string // fragments of the error; nil means valid
	}{
		{"valid", func(*cluster.Config) {}, nil},
		{"empty node name", func(c *cluster.Config) { c.NodeName = "" }, []string{"NodeName", `""`}},
		{"blank node name", func(c *cluster.Config) { c.NodeName = "  " }, []string{"NodeName"}},
		{"bind addr not an IP", func(c *cluster.Config) { c.BindAddr = "localhost" }, []string{"BindAddr", `"localhost"`}},
		{"bind port too big", func(c *cluster.Config) { c.BindPort = 70000 }, []string{"BindPort", "70000"}},
		{"bind port negative", func(c *cluster.Config) { c.BindPort = -1 }, []string{"BindPort", "-1"}},
		{"bind port 0 is fine", func(c *cluster.Config) { c.BindPort = 0 }, nil},
		{"advertise addr", func(c *cluster.Config) { c.AdvertiseAddr = "host.example" }, []string{"AdvertiseAddr", "host.example"}},
		{"advertise port", func(c *cluster.Config) { c.AdvertisePort = 65536 }, []string{"AdvertisePort", "65536"}},
		{"join seeds", func(c *cluster.Config) { c.Join = []string{"10.0.0.1:7946", "seed.example", "[::1]:7946"} }, nil},
		{"empty seed", func(c *cluster.Config) { c.Join = []string{"10.0.0.1:7946", ""} }, []string{"Join[1]"}},
		{"seed bad port", func(c *cluster.Config) { c.Join = []string{"10.0.0.1:99999"} }, []string{"Join[0]", "99999"}},
		{"retry interval", func(c *cluster.Config) { c.Join = []string{"a:1"}; c.JoinRetryInterval = 0 }, []string{"JoinRetryInterval", "0s"}},
		{"retry max below interval", func(c *cluster.Config) {
			c.Join = []string{"a:1"}
			c.JoinRetryMaxInterval = 100 * time.Millisecond
		}, []string{"JoinRetryMaxInterval", "100ms", "1s"}},
		{"key length", func(c *cluster.Config) { c.SecretKey = make([]byte, 10) }, []string{"SecretKey", "10 bytes", "16, 24 or 32"}},
		{"key 16", func(c *cluster.Config) { c.SecretKey = make([]byte, 16) }, nil},
		{"empty zone", func(c *cluster.Config) { c.Zone = "" }, []string{"Zone"}},
		{"relative URL", func(c *cluster.Config) { c.EurekaURL = "/eureka/" }, []string{"EurekaURL", `"/eureka/"`}},
		{"empty URL allowed", func(c *cluster.Config) { c.EurekaURL = "" }, nil},
		{"reconcile interval", func(c *cluster.Config) { c.ReconcileInterval = -time.Second }, []string{"ReconcileInterval", "-1s"}},
		{"nil memberlist", func(c *cluster.Config) { c.Memberlist = nil }, []string{"Memberlist"}},
		{"metadata too big", func(c *cluster.Config) { c.EurekaURL = "http://x/" + strings.Repeat("e", 600) }, []string{"metadata", "512"}},
		{"reports every problem", func(c *cluster.Config) { c.NodeName = ""; c.BindPort = 1 << 20 }, []string{"NodeName", "BindPort 1048576"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validConfig()
			tt.modify(&cfg)
			err := cfg.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want error containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "cluster: ") {
				t.Errorf("Validate() = %q, want prefix %q", err, "cluster: ")
			}
			if _, nerr := cluster.New(cfg); nerr == nil {
				t.Errorf("New accepted a config Validate rejects")
			}
		})
	}
}

func TestParseSecretKey(t *testing.T) {
	key32 := make([]byte, 32)
	for i := range key32 {
		key32[i] = byte(i)
	}
	tests := []struct {
		name    string
		in      string
		wantLen int
		wantErr string
	}{
		{"32 bytes", base64.StdEncoding.EncodeToString(key32), 32, ""},
		{"24 bytes", base64.StdEncoding.EncodeToString(key32[:24]), 24, ""},
		{"16 bytes with spaces", " " + base64.StdEncoding.EncodeToString(key32[:16]) + "\n", 16, ""},
		{"empty means no key", "", 0, ""},
		{"bad base64", "not base64!!", 0, "not valid base64"},
		{"wrong length", base64.StdEncoding.EncodeToString(key32[:20]), 0, "20 bytes, want 16, 24 or 32"},
		{"too long", base64.StdEncoding.EncodeToString(append(key32, 1)), 0, "33 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cluster.ParseSecretKey(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSecretKey(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSecretKey(%q) error = %v", tt.in, err)
			}
			if len(got) != tt.wantLen {
				t.Errorf("ParseSecretKey(%q) = %d bytes, want %d", tt.in, len(got), tt.wantLen)
			}
		})
	}
}

// New must not bind: it succeeds on a port that is taken, and Start then
// reports the bind failure with the address.
func TestNew_opensNoSocket(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	cfg := validConfig()
	cfg.BindAddr = "127.0.0.1"
	cfg.BindPort = port
	cfg.Memberlist = memberlist.DefaultLocalConfig()
	cfg.Logger = zerolog.Logger{} // the zero value must work and log nothing
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if got := c.Members(); len(got) != 0 {
		t.Errorf("Members() before Start = %+v, want empty", got)
	}
	err = c.Start(context.Background())
	if err == nil {
		_ = c.Shutdown(time.Second)
		t.Fatalf("Start on a taken port = nil, want a bind error")
	}
	if want := "127.0.0.1:" + strconv.Itoa(port); !strings.Contains(err.Error(), want) {
		t.Errorf("Start error = %q, want it to name %s", err, want)
	}
	if err := c.Shutdown(time.Second); err != nil {
		t.Errorf("Shutdown after failed Start = %v", err)
	}
}
