// Command muster runs a Muster node, a Eureka-compatible service registry,
// and the operator commands around it.
//
//	muster serve [--config FILE.yml] [--profile P] [--set key=value]… [--KEY=VALUE]…   run a node
//	muster health [--url URL]                             probe a node's /readyz (for container healthchecks)
//	muster status|members [--url URL]                     a node's state and its peers, for people
//	muster k8s-zone --out FILE                            the Kubernetes init container's zone lookup
//	muster config [--check --config FILE]                 list every setting with its default, or check a configuration
//	muster tls ca | cert                                  make a CA and node certificates
//	muster version
//
// The tools are their own commands and are not linked into this one:
// go run ./tools/bench (performance figures), go run ./tools/clients
// (simulated Eureka clients); tools/bench starts the node package in a
// process of its own. This package is the command line only: a node is
// assembled by package node.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/muster-registry/muster/internal/logging"
	"github.com/muster-registry/muster/node"
	"github.com/muster-registry/muster/settings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serveCmd(args[1:], stderr)
	case "health":
		err = healthCmd(args[1:], stdout)
	case "tls":
		err = tlsCmd(args[1:], stdout, stderr)
	case "status":
		err = statusCmd(args[1:], stdout)
	case "members":
		err = membersCmd(args[1:], stdout)
	case "drain":
		err = drainCmd("drain", args[1:], stdout, false)
	case "undrain":
		err = drainCmd("undrain", args[1:], stdout, true)
	case "k8s-zone":
		err = k8sZoneCmd(args[1:], stdout, stderr)
	case "config":
		err = configCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "muster", node.Version)
	case "help", "-h", "--help":
		usage(stdout)
	default:
		fmt.Fprintf(stderr, "muster: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if helpRequested(err) {
		return 0 // the command printed its usage
	}
	var exit *exitCodeError
	if errors.As(err, &exit) {
		if exit.msg != "" {
			fmt.Fprintln(stderr, "muster:", exit.msg)
		}
		return exit.code
	}
	if err != nil {
		fmt.Fprintln(stderr, "muster:", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Muster: a Eureka-compatible service registry whose nodes are equal peers.

Usage:
  muster serve [--config FILE.yml] [--profile P] [--set key=value]... [--KEY=VALUE]...
                                                          run a node (defaults: API and dashboard on :8761)
  muster health [--url 127.0.0.1:8761]                    exit 0 when the node is ready (container healthchecks)
  muster status [--url user:pass@127.0.0.1:8761]          the node's state, from its /admin/status
  muster members [--url user:pass@127.0.0.1:8761]         the node's peers and their replication
  muster drain [--url URL,...] [--wait 30s] APP ID        serve an instance OUT_OF_SERVICE everywhere and wait for its readers
                                                          (exit 0 complete, 3 readers pending, 1 error; preStop hooks)
  muster undrain [--url URL,...] APP ID                   lift a drain (also: muster drain --undo)
  muster k8s-zone --out FILE                              write cluster.zone from the Kubernetes node's zone label (init container)
  muster config [--markdown]                              list every setting and its default
  muster config --check [--config FILE] [--profile P]     check a configuration: every problem, the effective settings and their origins
  muster tls ca | cert [flags]                            make a CA and node certificates (muster tls -h)
  muster version

Tools (not part of this binary):
  go run ./tools/bench [--quick] [--only heartbeat,fetch,...]   performance figures next to this machine's ceiling
  go run ./tools/clients [--servers zone=url,...] [flags]       simulated Eureka clients (-h for flags)
`)
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func serveCmd(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: muster serve [--config FILE] [--profile P] [--set key=value]... [--KEY=VALUE]...\n\nAny setting may be given as --KEY=VALUE, as on Spring Boot's command line: muster serve --server.port=8762.")
		fs.PrintDefaults()
	}
	var cf configFlags
	cf.register(fs)
	if err := parseConfigArgs(fs, &cf, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	cfg, rep, err := settings.Load(cf.request(os.Environ()))
	if err != nil {
		if rep != nil && len(rep.Errors) > 1 {
			return fmt.Errorf("%d configuration errors (muster config --check lists them with the effective settings):\n%s", len(rep.Errors), err)
		}
		return err
	}
	notices := rep.Notices
	logger := logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	for _, nt := range notices {
		if nt.Warn {
			logger.Warn().Msg(nt.Msg)
		} else {
			logger.Debug().Msg(nt.Msg)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	n, err := node.New(cfg, logger)
	if err != nil {
		return err
	}
	if err := n.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	logger.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return n.Shutdown(shutdownCtx)
}

// printSettings lists every setting; --markdown prints docs/configuration.md's table.
func printSettings(w io.Writer, markdown bool) {
	if markdown {
		fmt.Fprintln(w, "| Key | Default | What it does |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, st := range settings.SettingDocs() {
			def := "—"
			if st.Default != "" {
				def = "`" + st.Default + "`"
			}
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", st.Key, def, st.Help)
		}
		return
	}
	for _, st := range settings.SettingDocs() {
		def := st.Default
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(w, "%s = %s\n    %s\n", st.Key, def, st.Help)
	}
}
