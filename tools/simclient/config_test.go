package simclient_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/tools/simclient"
)

func TestParseServers(t *testing.T) {
	tests := []struct {
		in      string
		want    []simclient.Server
		wantErr string
	}{
		{
			in: "a=http://node-a:8761/eureka/,b=http://node-b:8761/eureka/,c=http://node-c:8761/eureka/",
			want: []simclient.Server{
				{Zone: "a", URL: "http://node-a:8761/eureka/"},
				{Zone: "b", URL: "http://node-b:8761/eureka/"},
				{Zone: "c", URL: "http://node-c:8761/eureka/"},
			},
		},
		{in: "http://127.0.0.1:8761/eureka/", want: []simclient.Server{{Zone: "default", URL: "http://127.0.0.1:8761/eureka/"}}},
		{in: "http://127.0.0.1:8761/eureka", want: []simclient.Server{{Zone: "default", URL: "http://127.0.0.1:8761/eureka/"}}},
		{in: "http://h:8761", want: []simclient.Server{{Zone: "default", URL: "http://h:8761/"}}},
		{
			in: " a = http://x/eureka/ , ,http://y/eureka/,",
			want: []simclient.Server{
				{Zone: "a", URL: "http://x/eureka/"},
				{Zone: "default", URL: "http://y/eureka/"},
			},
		},
		// An '=' after the first '/' belongs to the URL.
		{in: "http://x/eureka/?a=b/", want: []simclient.Server{{Zone: "default", URL: "http://x/eureka/?a=b/"}}},
		{in: "", wantErr: "no servers"},
		{in: " , ", wantErr: "no servers"},
		{in: "=http://x/eureka/", wantErr: "empty zone"},
		{in: "a=node-a:8761/eureka/", wantErr: "want http(s)"},
		{in: "a=ftp://node-a/eureka/", wantErr: "want http(s)"},
		{in: "a=http:///eureka/", wantErr: "want http(s)"},
	}
	for _, tt := range tests {
		got, err := simclient.ParseServers(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseServers(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseServers(%q) error = %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseServers(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := simclient.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	tests := []struct {
		name    string
		change  func(*simclient.Config)
		wantErr string
	}{
		{"no servers", func(c *simclient.Config) { c.Servers = nil }, "no servers"},
		{"negative instances", func(c *simclient.Config) { c.Instances = -1 }, "Instances (-1)"},
		{"more apps than instances", func(c *simclient.Config) { c.Instances, c.Apps = 5, 6 }, "Apps (6) must be between 1 and Instances (5)"},
		{"no apps", func(c *simclient.Config) { c.Apps = 0 }, "Apps (0)"},
		{"observer", func(c *simclient.Config) { c.Instances, c.Apps = 0, 0 }, ""},
		{"renewal", func(c *simclient.Config) { c.RenewalInterval = 0 }, "RenewalInterval (0s)"},
		{"lease", func(c *simclient.Config) { c.LeaseDuration = -time.Second }, "LeaseDuration (-1s)"},
		{"fetch", func(c *simclient.Config) { c.FetchInterval = 0 }, "FetchInterval (0s)"},
		{"fetch disabled", func(c *simclient.Config) { c.FetchInterval, c.FetchDisabled = 0, true }, ""},
		{"timeout", func(c *simclient.Config) { c.RequestTimeout = 0 }, "RequestTimeout"},
		{"connect", func(c *simclient.Config) { c.ConnectTimeout = 0 }, "ConnectTimeout"},
		{"zone retry", func(c *simclient.Config) { c.ZoneRetryInterval = -1 }, "ZoneRetryInterval"},
		{"zone retry off", func(c *simclient.Config) { c.ZoneRetryInterval = 0 }, ""},
		{"cancel", func(c *simclient.Config) { c.CancelTimeout = 0 }, "CancelTimeout"},
		{"workers", func(c *simclient.Config) { c.Workers = 0 }, "Workers (0)"},
		{"prefix", func(c *simclient.Config) { c.IDPrefix = "Grp_1" }, `IDPrefix "Grp_1"`},
		{"empty prefix", func(c *simclient.Config) { c.IDPrefix = "" }, `IDPrefix ""`},
		{"url", func(c *simclient.Config) { c.Servers = []simclient.Server{{Zone: "a", URL: "http://x/eureka"}} }, `must end in "/"`},
	}
	for _, tt := range tests {
		cfg := simclient.DefaultConfig()
		tt.change(&cfg)
		err := cfg.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestStats_String(t *testing.T) {
	s := simclient.Stats{Instances: 100, Registered: 99, RenewalsOK: 300, Failovers: 1, LastViewInstances: 99, CurrentServer: "b=http://node-b:8761/eureka/"}
	got := s.String()
	for _, want := range []string{"registered 99/100", "renewals ok 300 failed 0", "failovers 1", "view 99", "server b=http://node-b:8761/eureka/"} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, want it to contain %q", got, want)
		}
	}
}
