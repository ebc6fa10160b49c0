package client

import (
	"net/http"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {5, 16 * time.Second}, {6, 30 * time.Second}, {100, 30 * time.Second}} {
		if got := backoff(time.Second, 30*time.Second, tc.n); got != tc.want {
			t.Errorf("backoff(1s, 30s, %d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}

func TestOrderServers_ownZoneFirst(t *testing.T) {
	list := []server{{zone: "b", base: "b1"}, {zone: "a", base: "a1"}, {zone: "c", base: "c1"}, {zone: "a", base: "a2"}, {zone: "b", base: "b2"}}
	got := orderServers(list, "a")
	want := []string{"a1", "a2", "b1", "c1", "b2"}
	for i, s := range got {
		if s.base != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestServerSet_failed_movesOnce(t *testing.T) {
	s := &serverSet{list: make([]server, 3)}
	now := time.Unix(0, 0)
	if !s.failed(0, now) || s.failed(0, now) {
		t.Fatal("two failures on server 0 at once must move only once")
	}
	if i, _ := s.current(now); i != 1 {
		t.Fatalf("current = %d, want 1", i)
	}
	s.failed(1, now)
	s.failed(2, now)
	if i, _ := s.current(now); i != 0 {
		t.Fatalf("current = %d after wrapping, want 0", i)
	}
}

func TestAcceptable(t *testing.T) {
	for _, tc := range []struct {
		op   op
		code int
		want bool
	}{
		{opRegister, 204, true}, {opRegister, 404, true}, {opRegister, 500, false}, {opRegister, 503, false},
		{opRenew, 200, true}, {opRenew, 404, true}, {opRenew, 502, false},
		{opCancel, 404, true}, {opCancel, 500, false},
		{opFetchFull, 200, true}, {opFetchFull, 403, false}, {opFetchFull, 404, false},
		{opFetchDelta, 403, true}, {opFetchDelta, 404, true}, {opFetchDelta, 500, false},
		{opFetchApp, 404, true}, {opFetchApp, 400, true}, {opFetchApp, 403, false},
		{opStatus, 404, true}, {opStatus, http.StatusUnauthorized, true},
	} {
		if got := acceptable(tc.op, tc.code); got != tc.want {
			t.Errorf("acceptable(%s, %d) = %v, want %v", tc.op, tc.code, got, tc.want)
		}
	}
}

func TestParseServers(t *testing.T) {
	got, err := ParseServers("a=http://n1:8761/eureka/, http://n2:8761/eureka/")
	if err != nil || len(got) != 2 || got[0] != (Server{Zone: "a", URL: "http://n1:8761/eureka/"}) ||
		got[1] != (Server{Zone: DefaultZone, URL: "http://n2:8761/eureka/"}) {
		t.Fatalf("ParseServers = %v, %v", got, err)
	}
	if _, err := ParseServers(" , "); err == nil {
		t.Fatal("empty list accepted")
	}
}

func TestParseServer_basicAuth(t *testing.T) {
	s, err := parseServer(Server{URL: "https://svc:p%40ss@n1:8761/eureka"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.auth || s.user != "svc" || s.password != "p@ss" || s.base != "https://n1:8761/eureka/" || s.zone != DefaultZone {
		t.Fatalf("parsed %+v", s)
	}
	for _, bad := range []string{"ftp://n1/", "n1:8761/eureka", "http://"} {
		if _, err := parseServer(Server{URL: bad}); err == nil {
			t.Errorf("parseServer(%q) accepted", bad)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"no servers":        func(c *Config) { c.Servers = nil },
		"zero timeout":      func(c *Config) { c.RequestTimeout = 0 },
		"negative zone":     func(c *Config) { c.ZoneRetryInterval = -1 },
		"backoff above max": func(c *Config) { c.RetryBackoff = time.Minute },
	} {
		cfg := DefaultConfig()
		mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
