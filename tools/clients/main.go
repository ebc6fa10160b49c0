// Command clients runs a fleet of simulated Eureka clients (package
// tools/simclient) against Muster or any Eureka server:
//
//	go run ./tools/clients --servers "a=http://node-a:8761/eureka/,b=…" --zone a \
//	    --instances 100 --apps 10 --id-prefix grp1 [--status-addr :9100]
//
// A secured cluster: https URLs with credentials, as Spring clients write
// them, and the CA (plus a client certificate for client-auth need):
//
//	go run ./tools/clients --servers "a=https://fleet:pw@node-a:8761/eureka/" \
//	    --ca-cert certs/muster-ca.pem --cert certs/clients.pem --key certs/clients-key.pem
//
// The container image carries it as /muster-clients (scripts/build-image.sh).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/muster-registry/muster/internal/logging"
	"github.com/muster-registry/muster/tools/simclient"
)

func main() {
	if err := clientsCmd(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "clients:", err)
		os.Exit(1)
	}
}

// clientsCmd runs the fleet until SIGINT or SIGTERM, then cancels every
// instance. It prints a progress line to stderr every --progress and, at the end, a
// summary to stdout: plain lines, then one line "summary: {…}" with the
// figures as JSON (simclient.Stats) for scripts. --status-addr serves the
// same JSON on GET /stats while it runs.
func clientsCmd(args []string, stdout, stderr io.Writer) error {
	def := simclient.DefaultConfig()
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	servers := fs.String("servers", def.Servers[0].URL, "Eureka servers, comma-separated, each zone=url or a bare url (zone \"default\"); same-zone servers are used first")
	zone := fs.String("zone", def.Zone, "zone of the fleet: orders the servers, and goes into every instance's metadata")
	instances := fs.Int("instances", def.Instances, "number of simulated instances (0: only fetch)")
	apps := fs.Int("apps", def.Apps, "number of apps the instances are spread over (APP-00, APP-01, …)")
	prefix := fs.String("id-prefix", def.IDPrefix, "prefix of instance ids and host names (<prefix>-app-00-0); give each fleet its own")
	renewal := fs.Duration("renewal-interval", def.RenewalInterval, "heartbeat interval of each instance (leaseInfo.renewalIntervalInSecs)")
	lease := fs.Duration("lease-duration", def.LeaseDuration, "lease duration the instances ask for (leaseInfo.durationInSecs)")
	fetch := fs.Duration("fetch-interval", def.FetchInterval, "registry fetch interval (delta, full when needed)")
	noFetch := fs.Bool("no-fetch", def.FetchDisabled, "do not fetch the registry")
	requestTimeout := fs.Duration("request-timeout", def.RequestTimeout, "timeout of one request, reply included")
	connectTimeout := fs.Duration("connect-timeout", def.ConnectTimeout, "connect timeout")
	zoneRetry := fs.Duration("zone-retry-interval", def.ZoneRetryInterval, "this long after a failover, move back to the own zone's first server (0: never)")
	cancelTimeout := fs.Duration("cancel-timeout", def.CancelTimeout, "time allowed for cancelling every instance on shutdown (keep below the container's stop grace period)")
	workers := fs.Int("workers", def.Workers, "requests in flight at most")
	progress := fs.Duration("progress", 5*time.Second, "print a progress line to stderr this often (0: never)")
	statusAddr := fs.String("status-addr", "", "serve GET /stats (JSON) on this address, e.g. :9100 (empty: off)")
	caCert := fs.String("ca-cert", "", "PEM CA bundle to verify https servers against (default: the system roots)")
	cert := fs.String("cert", "", "PEM client certificate, for servers with server.ssl.client-auth need")
	key := fs.String("key", "", "PEM key of --cert")
	logLevel := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	logFormat := fs.String("log-format", "auto", "log format: auto, console, json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	list, err := simclient.ParseServers(*servers)
	if err != nil {
		return fmt.Errorf("--servers: %w", err)
	}

	cfg := def
	cfg.Servers = list
	cfg.Zone = *zone
	cfg.Instances, cfg.Apps, cfg.IDPrefix = *instances, *apps, *prefix
	cfg.RenewalInterval, cfg.LeaseDuration, cfg.FetchInterval, cfg.FetchDisabled = *renewal, *lease, *fetch, *noFetch
	cfg.RequestTimeout, cfg.ConnectTimeout = *requestTimeout, *connectTimeout
	cfg.ZoneRetryInterval, cfg.CancelTimeout, cfg.Workers = *zoneRetry, *cancelTimeout, *workers
	cfg.Logger = logging.New(stderr, *logLevel, *logFormat)
	if cfg.TLS, err = clientTLS(*caCert, *cert, *key); err != nil {
		return err
	}
	fleet, err := simclient.New(cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *statusAddr != "" {
		srv, err := serveStats(*statusAddr, fleet)
		if err != nil {
			return fmt.Errorf("--status-addr: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}

	start := time.Now()
	done := make(chan struct{})
	if *progress > 0 {
		go func() {
			t := time.NewTicker(*progress)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					fmt.Fprintf(stderr, "clients: %s\n", fleet.Stats())
				}
			}
		}()
	}
	err = fleet.Run(ctx)
	close(done)
	if err != nil {
		return err
	}
	return printSummary(stdout, fleet.Stats(), time.Since(start))
}

// serveStats serves GET /stats on addr. It listens before returning, so a
// taken port is an error at start-up, not a log line later.
func serveStats(addr string, fleet *simclient.Fleet) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(fleet.Stats())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "clients: status server:", err)
		}
	}()
	return srv, nil
}

// printSummary writes the final figures: plain lines for people, then one
// "summary: " line of JSON for scripts.
func printSummary(w io.Writer, s simclient.Stats, ran time.Duration) error {
	fmt.Fprintf(w, "ran %s with %d instances\n", ran.Round(time.Millisecond), s.Instances)
	fmt.Fprintf(w, "registrations %d (failed %d, %.0f/s at start), re-registrations after 404: %d\n",
		s.Registrations, s.RegistrationFailures, s.RegistrationRate, s.ReRegistrations)
	fmt.Fprintf(w, "renewals ok %d, failed %d; failovers %d, zone returns %d, last server %s\n",
		s.RenewalsOK, s.RenewalsFailed, s.Failovers, s.ZoneReturns, s.CurrentServer)
	fmt.Fprintf(w, "fetches full %d, delta %d, reconcile %d, failed %d; empty registry seen %d; last view %d instances (%s)\n",
		s.FullFetches, s.DeltaFetches, s.ReconcileFetches, s.FetchFailures, s.EmptyRegistrySeen, s.LastViewInstances, s.ViewHashcode)
	fmt.Fprintf(w, "cancels %d, failed %d, still registered %d\n", s.Cancels, s.CancelFailures, s.Registered)
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "summary: %s\n", b)
	return err
}

// clientTLS is the fleet's TLS: verify servers against caFile (system
// roots when empty), present certFile when given; nil when neither is set.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert and --key go together")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-cert %s: no PEM certificate", caFile)
		}
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
