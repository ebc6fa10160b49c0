package simclient

import (
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/muster-registry/muster/client"
)

// newHTTPClient builds the fleet's shared HTTP client: keep-alive, a
// connect timeout, and enough idle connections per server for every
// worker. The request timeout comes from each request's context.
func newHTTPClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			MaxIdleConns:          0, // no global cap
			MaxIdleConnsPerHost:   cfg.Workers + 4,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   cfg.ConnectTimeout,
			TLSClientConfig:       cfg.TLS,
			ResponseHeaderTimeout: cfg.RequestTimeout,
			// The client package asks for gzip itself and inflates it.
			DisableCompression: true,
		},
		// Eureka's replies never redirect.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// newAPIClient builds the package client the fleet sends every request
// through: it owns the server list, zone order, failover and the return to
// the own zone (see the client package), so the simulated fleet exercises
// the same code a Go service runs.
func newAPIClient(cfg Config, httpc *http.Client, now func() time.Time) (*client.Client, error) {
	cc := client.DefaultConfig()
	cc.Servers = slices.Clone(cfg.Servers)
	cc.Zone = cfg.Zone
	cc.RequestTimeout = cfg.RequestTimeout
	cc.ZoneRetryInterval = cfg.ZoneRetryInterval
	cc.HTTPClient = httpc
	cc.Logger = cfg.Logger
	cc.Clock = nowClock(now)
	return client.New(cc)
}

// nowClock is the client's clock: the fleet's Now (which tests set), and
// real timers (the fleet never asks the client to wait on one: it runs no
// Registration and no Watch).
type nowClock func() time.Time

func (n nowClock) Now() time.Time                       { return n() }
func (nowClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
