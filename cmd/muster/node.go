package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Node is one running Muster node: registry, HTTP API, and (in a cluster)
// membership and replication. Tests start several in one process.
type Node struct {
	settings *Settings
	log      zerolog.Logger

	reg     *registry.Registry
	api     *httpapi.Server
	metrics *prometheus.Registry

	listener   net.Listener
	httpServer *http.Server
	url        string // advertised Eureka base URL, e.g. http://10.0.0.5:8761/eureka/
	host, ip   string

	ready atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
}

// newNode builds a node from settings. It opens nothing and starts no
// goroutines; Start does.
func newNode(s *Settings, logger zerolog.Logger) (*Node, error) {
	n := &Node{settings: s, log: logger, done: make(chan struct{})}
	rcfg := registry.DefaultConfig()
	rcfg.Logger = logger
	rcfg.SelfPreservation = s.SelfPreservation
	rcfg.RenewalPercentThreshold = s.RenewalPercentThreshold
	rcfg.ExpectedRenewalInterval = s.ExpectedClientRenewalInterval
	rcfg.RenewThresholdUpdateInterval = s.RenewalThresholdUpdateInterval
	rcfg.EvictionInterval = s.EvictionInterval
	rcfg.DeltaRetention = s.DeltaRetention
	rcfg.DeltaRetentionInterval = s.DeltaRetentionInterval
	rcfg.SyncWhenTimestampDiffers = s.SyncWhenTimestampDiffers
	rcfg.RenewalRateWindow = s.MeasuredRateWindow
	reg, err := registry.New(rcfg)
	if err != nil {
		return nil, err
	}
	n.reg = reg

	n.metrics = prometheus.NewRegistry()
	n.metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return n, nil
}

// Start listens, opens for traffic and starts the background work. It
// returns once the node serves HTTP; readiness follows.
func (n *Node) Start(ctx context.Context) error {
	s := n.settings
	addr := net.JoinHostPort(s.ServerAddress, strconv.Itoa(s.ServerPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (server.port): %w", addr, err)
	}
	n.listener = ln
	port := ln.Addr().(*net.TCPAddr).Port
	n.host, n.ip = advertisedHost(s)
	urlHost := n.host
	if s.InstancePreferIP {
		urlHost = n.ip
	}
	n.url = "http://" + net.JoinHostPort(urlHost, strconv.Itoa(port)) + "/eureka/"
	name := s.ClusterNodeName
	if name == "" {
		name = n.host
	}

	hcfg := httpapi.DefaultConfig()
	hcfg.Registry = n.reg
	hcfg.Logger = n.log
	hcfg.Metrics = n.metrics
	hcfg.Gatherer = n.metrics
	hcfg.Node = httpapi.NodeInfo{Name: name, Zone: s.ClusterZone, URL: n.url, Environment: s.Environment, Datacenter: s.Datacenter, Version: version}
	hcfg.Ready = n.ready.Load
	hcfg.DisableDelta = s.DisableDelta
	hcfg.MaxBodyBytes = s.MaxBodyBytes
	hcfg.MaxBatchBodyBytes = s.MaxBatchBodyBytes
	api, err := httpapi.New(hcfg)
	if err != nil {
		ln.Close()
		return err
	}
	n.api = api
	n.httpServer = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          nil,
	}

	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		if err := n.httpServer.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error().Err(err).Msg("http server stopped")
		}
	}()
	go func() {
		defer n.wg.Done()
		n.reg.Run(runCtx)
	}()
	n.log.Info().Str("addr", ln.Addr().String()).Str("url", n.url).Str("node", name).Str("zone", s.ClusterZone).
		Str("version", version).Msg("serving the Eureka API")

	n.reg.OpenForTraffic()
	n.ready.Store(true)

	if s.RegisterWithEureka {
		sr := &selfRegistration{
			reg:      n.reg,
			instance: selfInstance(s, n.host, n.ip, time.Now()),
			interval: time.Duration(s.InstanceRenewalInterval) * time.Second,
			log:      n.log.With().Str("component", "self-registration").Logger(),
		}
		sr.instance.Port.Number = port
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			sr.run(runCtx)
		}()
	}
	return nil
}

// URL is the node's advertised Eureka base URL.
func (n *Node) URL() string { return n.url }

// Addr is the address the HTTP server listens on.
func (n *Node) Addr() string { return n.listener.Addr().String() }

// Shutdown stops the node gracefully: no new requests, in-flight ones
// finish, the self-registration is cancelled, background work stops.
func (n *Node) Shutdown(ctx context.Context) error {
	n.ready.Store(false)
	var errs []error
	if n.httpServer != nil {
		if err := n.httpServer.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
	n.log.Info().Msg("stopped")
	return errors.Join(errs...)
}

// advertisedHost picks the host name and IP address the node tells others.
func advertisedHost(s *Settings) (host, ip string) {
	host = s.InstanceHostname
	if host == "" {
		host, _ = os.Hostname()
	}
	if host == "" {
		host = "localhost"
	}
	ip = s.InstanceIPAddress
	if ip == "" {
		ip = s.ClusterAdvertiseAddr
	}
	if ip == "" {
		ip = firstIPv4()
	}
	return host, ip
}

// firstIPv4 returns the first non-loopback IPv4 address, or 127.0.0.1.
func firstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

func itoa(i int) string { return strconv.Itoa(i) }
