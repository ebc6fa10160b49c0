package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want outcome
	}{
		{"no error", nil, outcomeSuccess},
		{"503", &StatusError{Code: 503}, outcomeCongestion},
		{"503 wrapped", fmt.Errorf("send batch to a: %w", &StatusError{Code: 503}), outcomeCongestion},
		{"500", &StatusError{Code: 500}, outcomePermanent},
		{"404", &StatusError{Code: 404}, outcomePermanent},
		{"400", &StatusError{Code: 400}, outcomePermanent},
		{"413 wrapped", fmt.Errorf("x: %w", &StatusError{Code: 413}), outcomePermanent},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, outcomeTransient},
		{"EOF", io.ErrUnexpectedEOF, outcomeTransient},
		{"timeout", context.DeadlineExceeded, outcomeTransient},
		{"read timeout", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), outcomeTransient},
		{"any other error", errors.New("boom"), outcomeTransient},
		{"sender stopping", fmt.Errorf("send batch to a: %w", context.Canceled), outcomeAborted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %s, want %s", tt.err, got, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		base     time.Duration
		failures int
		max      time.Duration
		want     time.Duration
	}{
		{time.Second, 0, 30 * time.Second, 0},
		{time.Second, 1, 30 * time.Second, time.Second},
		{time.Second, 2, 30 * time.Second, 2 * time.Second},
		{time.Second, 5, 30 * time.Second, 16 * time.Second},
		{time.Second, 6, 30 * time.Second, 30 * time.Second},
		{time.Second, 1000, 30 * time.Second, 30 * time.Second}, // no overflow
		{100 * ms, 1, 30 * time.Second, 100 * ms},
		{100 * ms, 3, 30 * time.Second, 400 * ms},
		{100 * ms, 9, 30 * time.Second, 25600 * ms},
		{100 * ms, 10, 30 * time.Second, 30 * time.Second},
		{time.Second, 1, 500 * ms, 500 * ms}, // max below base wins
		{0, 3, time.Second, 0},
	}
	for _, tt := range tests {
		if got := backoff(tt.base, tt.failures, tt.max); got != tt.want {
			t.Errorf("backoff(%s, %d, %s) = %s, want %s", tt.base, tt.failures, tt.max, got, tt.want)
		}
	}
}

func TestLogLimiter_Allow(t *testing.T) {
	var l logLimiter
	steps := []struct {
		at             time.Duration
		ok             bool
		wantSuppressed int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{11 * time.Second, false, 0},
		{25 * time.Second, true, 1},
	}
	for _, s := range steps {
		ok, n := l.allow(t0.Add(s.at), 10*time.Second)
		if ok != s.ok || n != s.wantSuppressed {
			t.Errorf("allow(t0+%s) = %v, %d, want %v, %d", s.at, ok, n, s.ok, s.wantSuppressed)
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := DefaultConfig()
	ok.Transport = nopTransport{}
	ok.Store = newFakeStore(t)
	if err := ok.Validate(); err != nil {
		t.Fatalf("DefaultConfig() with a Transport and a Store: Validate() = %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig() alone: Validate() = %v; the wiring is New's to check", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no transport", func(c *Config) { c.Transport = nil }, "replication: Transport is required"},
		{"no store", func(c *Config) { c.Store = nil }, "replication: Store is required"},
		{"batch size", func(c *Config) { c.MaxBatchSize = 0 }, "replication: MaxBatchSize must be at least 1, got 0"},
		{"muster batch size", func(c *Config) { c.MaxMusterBatchSize = -1 }, "replication: MaxMusterBatchSize must not be negative, got -1"},
		{"queue below batch", func(c *Config) { c.MaxQueueSize = 100 }, "replication: MaxQueueSize must be from MaxBatchSize (250) to 10000000, got 100"},
		{"inbox", func(c *Config) { c.InboxSize = 0 }, "replication: InboxSize must be at least 1, got 0"},
		{"task age", func(c *Config) { c.TaskMaxAge = 0 }, "replication: TaskMaxAge must be positive, got 0s"},
		{"cap below base", func(c *Config) { c.MaxCongestionRetryDelay = 500 * time.Millisecond },
			"replication: MaxCongestionRetryDelay (500ms) must be at least CongestionRetryDelay (1s)"},
		{"network cap", func(c *Config) { c.MaxNetworkFailureRetryDelay = time.Millisecond },
			"replication: MaxNetworkFailureRetryDelay (1ms) must be at least NetworkFailureRetryDelay (100ms)"},
		{"queue too long", func(c *Config) { c.MaxQueueSize = MaxQueueSizeLimit + 1 }, "replication: MaxQueueSize must be from MaxBatchSize (250) to 10000000, got 10000001"},
		{"send timeout", func(c *Config) { c.SendTimeout = -1 }, "replication: SendTimeout must not be negative, got -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			// Validate checks the knobs, New the wiring too.
			err := c.Validate()
			if err == nil {
				_, err = New(c)
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

type nopTransport struct{ noAntiEntropy }

// noAntiEntropy gives a test transport the anti-entropy calls of a peer
// that does not serve them.
type noAntiEntropy struct{}

func (noAntiEntropy) Digest(context.Context, Peer, wire.DigestRequest) (wire.DigestReply, error) {
	return wire.DigestReply{}, ErrNoAntiEntropy
}

func (noAntiEntropy) Copies(context.Context, Peer, []registry.InstanceKey) ([]registry.VersionedCopy, error) {
	return nil, ErrNoAntiEntropy
}

func (nopTransport) Send(context.Context, Peer, Batch) (BatchResult, error) {
	return BatchResult{}, nil
}

func (nopTransport) FetchRegistry(context.Context, Peer) ([]*registry.Instance, error) {
	return nil, nil
}

func TestHTTPTransportConfig_Validate(t *testing.T) {
	if _, err := NewHTTPTransport(DefaultHTTPTransportConfig()); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tt := range []struct {
		change func(*HTTPTransportConfig)
		want   string
	}{
		{func(c *HTTPTransportConfig) { c.ConnectTimeout = 0 }, "replication: ConnectTimeout must be positive, got 0s"},
		{func(c *HTTPTransportConfig) { c.RequestTimeout = -time.Second }, "replication: RequestTimeout must be positive, got -1s"},
		{func(c *HTTPTransportConfig) { c.MaxSyncBodyBytes = 0 }, "replication: MaxSyncBodyBytes must be positive, got 0"},
	} {
		c := DefaultHTTPTransportConfig()
		tt.change(&c)
		if tr, err := NewHTTPTransport(c); err == nil || err.Error() != tt.want || tr != nil {
			t.Errorf("NewHTTPTransport = %v, %v; want nil, %q", tr, err, tt.want)
		}
	}
}

func TestSyncConfig_Validate(t *testing.T) {
	if err := DefaultSyncConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tt := range []struct {
		change func(*SyncConfig)
		want   string
	}{
		{func(c *SyncConfig) { c.Attempts = -1 }, "replication: Attempts must be from 0 to 1000, got -1"},
		{func(c *SyncConfig) { c.Attempts = MaxSyncAttempts + 1 }, "replication: Attempts must be from 0 to 1000, got 1001"},
		{func(c *SyncConfig) { c.RetryWait = 0 }, "replication: RetryWait must be positive, got 0s"},
		{func(c *SyncConfig) { c.FetchTimeout = -1 }, "replication: FetchTimeout must not be negative, got -1ns"},
	} {
		c := DefaultSyncConfig()
		tt.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
		c.Store, c.Transport, c.Candidates = newFakeStore(t), nopTransport{}, func() []Peer { return nil }
		if s, err := NewSyncer(c); err == nil || s != nil {
			t.Errorf("NewSyncer accepted what Validate refuses: %v", err)
		}
	}
}

func TestAntiEntropyConfig_Validate(t *testing.T) {
	if err := DefaultAntiEntropyConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tt := range []struct {
		change func(*AntiEntropyConfig)
		want   string
	}{
		{func(c *AntiEntropyConfig) { c.Interval = -1 }, "replication: Interval must not be negative (0 turns anti-entropy off), got -1ns"},
		{func(c *AntiEntropyConfig) { c.RequestTimeout = -time.Second }, "replication: RequestTimeout must not be negative, got -1s"},
	} {
		c := DefaultAntiEntropyConfig()
		tt.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate() = %v, want %q", err, tt.want)
		}
		c.Store, c.Transport, c.Peers = newFakeStore(t), nopTransport{}, func() []Peer { return nil }
		if a, err := NewAntiEntropy(c); err == nil || a != nil {
			t.Errorf("NewAntiEntropy accepted what Validate refuses: %v", err)
		}
	}
}
