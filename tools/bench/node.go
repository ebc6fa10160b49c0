package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/muster-registry/muster/internal/logging"
	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/node"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/settings"
)

// nodeCmd is `bench node`: a real node (package node, assembled exactly
// as `muster serve` assembles it) with a loopback control listener, the
// server under test that the bench starts as a child process of its own
// binary, so that the load generator's CPU and GC stay out of it. It prints
// one JSON line (proccontrol.Ready) on stdout once it serves, and stops
// when stdin closes or on SIGTERM.
//
// The control listener answers:
//
//	GET  /cpu                   user+system CPU seconds of this process
//	GET  /mem[?free=1]          heap after two GCs, RSS (optionally after FreeOSMemory)
//	GET  /status                opened, peers, instances (fleet: all but the nodes' own), version, syncUp's duration and copy
//	GET  /snapshot              build the registry snapshot
//	GET  /watch?app&id[&status] flush "armed", then answer when the registry shows it
//	GET  /profile?seconds=N     CPU profile of this process (kind=heap: heap profile)
func nodeCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "bench", "node name")
	clustered := fs.Bool("cluster", false, "run memberlist on loopback, with the timings a deployed node uses (memberlist.DefaultLANConfig)")
	fastGossip := fs.Bool("fast-gossip", false, "with --cluster: memberlist.DefaultLocalConfig's faster timings (gossip every 100 ms instead of 200)")
	join := fs.String("join", "", "gossip seed host:port (with --cluster)")
	startProfile := fs.String("start-profile", "", "write a CPU profile of the start-up (syncUp included) to this file")
	var sets stringList
	fs.Var(&sets, "set", "key=value for the node (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench node: unexpected argument %q", fs.Arg(0))
	}

	return serveChild(stdout, func(ctx context.Context, ctl *http.ServeMux) (proccontrol.Ready, func(context.Context) error, error) {
		if *startProfile != "" {
			f, err := os.Create(*startProfile)
			if err != nil {
				return proccontrol.Ready{}, nil, err
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
				return proccontrol.Ready{}, nil, err
			}
		}
		n, own, err := benchStartNode(ctx, *name, *clustered, *fastGossip, *join, sets, stderr)
		if *startProfile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return proccontrol.Ready{}, nil, err
		}
		benchNodeControl(ctl, n, own)
		return proccontrol.Ready{Mode: "muster", PID: os.Getpid(), API: n.Addr(), Gossip: n.GossipAddr()}, n.Shutdown, nil
	})
}

// benchNodeSets are the settings of every bench node: loopback only, no
// eviction during a run (the fleet does not heartbeat between scenarios),
// quiet logs. Later --set values win.
func benchNodeSets(name string, clustered bool, join string) []string {
	sets := []string{
		"server.port=0", "server.address=127.0.0.1",
		"eureka.instance.hostname=127.0.0.1", "eureka.instance.ip-address=127.0.0.1",
		"eureka.server.eviction-interval-timer-in-ms=3600000",
		"muster.log.level=warn", "muster.log.format=json",
		"cluster.node-name=" + name,
	}
	if !clustered {
		return append(sets, "cluster.enabled=false")
	}
	sets = append(sets, "cluster.enabled=true", "cluster.bind-addr=127.0.0.1", "cluster.bind-port=0",
		"cluster.advertise-addr=127.0.0.1", "eureka.server.registry-sync-retry-wait-ms=200")
	if join != "" {
		sets = append(sets, "cluster.join="+join)
	}
	return sets
}

// benchStartNode starts the node and returns it with the name of the
// app it registers itself as (spring.application.name, upper case).
func benchStartNode(ctx context.Context, name string, clustered, fastGossip bool, join string, extra []string, stderr io.Writer) (*node.Node, string, error) {
	s, _, err := settings.LoadSettings("", nil, append(benchNodeSets(name, clustered, join), extra...))
	if err != nil {
		return nil, "", err
	}
	own := strings.ToUpper(s.AppName)
	logger := logging.New(stderr, s.LogLevel, s.LogFormat).With().Str("node", name).Logger()
	var opts node.Options
	if clustered && fastGossip {
		opts.Memberlist = memberlist.DefaultLocalConfig()
	}
	n, err := node.New(s, logger, opts)
	if err != nil {
		return nil, "", err
	}
	if err := n.Start(ctx); err != nil {
		return nil, "", err
	}
	select {
	case <-n.Opened():
	case <-time.After(10 * time.Minute): // syncUp of a 1M-instance registry takes a while
		return nil, "", errors.New("bench node: the node did not open for traffic within 10 minutes")
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	return n, own, nil
}

// benchNodeControl adds the endpoints about the node. ownApp is the app
// the node registers itself as (eureka.client.register-with-eureka, on by
// default as in Spring): every node of a cluster registers as that app, so
// the bench's fleet is every instance but that app's.
func benchNodeControl(ctl *http.ServeMux, n *node.Node, ownApp string) {
	ctl.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		took, synced := n.SyncUp() // written before Opened, which benchStartNode waited for
		sizes := n.Registry().AppSizes(0, nil)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"opened":        n.Ready(),
			"peers":         len(n.Peers()),
			"instances":     n.Registry().Len(),
			"fleet":         benchFleetCount(sizes, ownApp),
			"own":           sizes[ownApp],
			"version":       n.Registry().Version(),
			"syncSeconds":   took.Seconds(),
			"syncInstances": synced.Instances,
		})
	})
	ctl.HandleFunc("/snapshot", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		snap := n.Registry().Snapshot()
		fmt.Fprintf(w, `{"instances":%d,"seconds":%.6f}`, snap.Instances, time.Since(start).Seconds())
	})
	ctl.HandleFunc("/watch", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		app, id, status := q.Get("app"), q.Get("id"), registry.Status(q.Get("status"))
		timeout, err := time.ParseDuration(q.Get("timeout"))
		if err != nil || timeout <= 0 {
			timeout = 10 * time.Second
		}
		seen := func() bool {
			iv, ok := n.Registry().Instance(app, id)
			return ok && (status == "" || iv.Status == status)
		}
		if seen() {
			http.Error(w, "already there before the watch began", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "armed\n")
		w.(http.Flusher).Flush()
		// Poll every 100 µs: one read lock and a map lookup per poll.
		deadline := time.Now().Add(timeout)
		for !seen() {
			if time.Now().After(deadline) || r.Context().Err() != nil {
				_, _ = io.WriteString(w, "timeout\n")
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
		fmt.Fprintf(w, "%d\n", time.Now().UnixNano())
	})
}

// benchFleetCount is how many instances of the bench's fleet a node holds:
// every app's instances but the nodes' own app's (a node registers itself,
// and a cluster's nodes each register as that app).
func benchFleetCount(appSizes map[string]int, ownApp string) int {
	n := 0
	for app, k := range appSizes {
		if !strings.EqualFold(app, ownApp) {
			n += k
		}
	}
	return n
}
