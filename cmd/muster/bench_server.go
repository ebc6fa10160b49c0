package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/registry"
)

// benchServerCmd is `muster bench server`: the server under test, started
// by `muster bench` as a child process so that the load generator's CPU and
// GC stay out of it. Mode muster runs a real node (newNode + Start);
// mode bare runs the ceiling: echo with no-op routes on the same paths,
// served by the same http.Server settings. Either way it prints one JSON
// line (benchServerInfo) on stdout once it serves, and stops when stdin
// closes or on SIGTERM.
//
// Besides the API, a control listener answers the bench:
//
//	GET  /cpu                   user+system CPU seconds of this process
//	GET  /mem[?free=1]          heap after two GCs, RSS (optionally after FreeOSMemory)
//	GET  /status                opened, peers, instances, version (muster)
//	GET  /snapshot              build the registry snapshot (muster)
//	GET  /watch?app&id[&status] flush "armed", then answer when the registry shows it (muster)
//	GET  /profile?seconds=N     CPU profile of this process (kind=heap: heap profile)
//	POST /body?path=P           bytes the bare server answers GET P with (bare)
func benchServerCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "muster", "muster or bare")
	name := fs.String("name", "bench", "node name")
	clustered := fs.Bool("cluster", false, "run memberlist on loopback with fast timings (memberlist.DefaultLocalConfig)")
	join := fs.String("join", "", "gossip seed host:port (with --cluster)")
	var sets stringList
	fs.Var(&sets, "set", "key=value for the muster node (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		// The parent holds our stdin: when it goes, so do we.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()

	ctl := http.NewServeMux()
	ctl.HandleFunc("/cpu", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%.6f", benchProcessCPU().Seconds())
	})
	ctl.HandleFunc("/mem", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(benchReadMem(r.URL.Query().Get("free") == "1"))
	})
	ctl.HandleFunc("/profile", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("kind") == "heap" {
			runtime.GC()
			_ = pprof.Lookup("heap").WriteTo(w, 0)
			return
		}
		secs, _ := strconv.Atoi(r.URL.Query().Get("seconds"))
		if secs <= 0 {
			secs = 5
		}
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		time.Sleep(time.Duration(secs) * time.Second)
		pprof.StopCPUProfile()
	})

	info := benchServerInfo{Mode: *mode, PID: os.Getpid()}
	var shutdown func(context.Context) error
	switch *mode {
	case "muster":
		n, err := benchStartNode(ctx, *name, *clustered, *join, sets, stderr)
		if err != nil {
			return err
		}
		shutdown = n.Shutdown
		info.API = n.Addr()
		if n.cluster != nil {
			for _, m := range n.cluster.Members() {
				if m.Self {
					info.Gossip = net.JoinHostPort(m.Addr, strconv.Itoa(m.Port))
				}
			}
		}
		benchNodeControl(ctl, n)
	case "bare":
		srv, addr, err := benchStartBare(ctl)
		if err != nil {
			return err
		}
		shutdown = srv.Shutdown
		info.API = addr
	default:
		return fmt.Errorf("bench server: unknown mode %q (muster or bare)", *mode)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctlSrv := &http.Server{Handler: ctl, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ctlSrv.Serve(ln) }()
	info.Control = ln.Addr().String()
	line, _ := json.Marshal(info)
	fmt.Fprintf(stdout, "%s\n", line)

	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ctlSrv.Close()
	return shutdown(sctx)
}

// benchServerInfo is the line a bench server prints when it is ready.
type benchServerInfo struct {
	Mode    string `json:"mode"`
	PID     int    `json:"pid"`
	API     string `json:"api"`              // host:port of the Eureka API (or the bare routes)
	Control string `json:"control"`          // host:port of the control listener
	Gossip  string `json:"gossip,omitempty"` // memberlist host:port, with --cluster
}

// benchServerSets are the settings of every bench node: loopback only, no
// eviction during a run (the fleet does not heartbeat between scenarios),
// quiet logs. Later --set values win.
func benchServerSets(name string, clustered bool, join string) []string {
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

func benchStartNode(ctx context.Context, name string, clustered bool, join string, extra []string, stderr io.Writer) (*Node, error) {
	s, _, err := loadSettings("", nil, append(benchServerSets(name, clustered, join), extra...))
	if err != nil {
		return nil, err
	}
	logger := newLogger(stderr, s.LogLevel, s.LogFormat).With().Str("node", name).Logger()
	var opts nodeOptions
	if clustered {
		opts.memberlist = memberlist.DefaultLocalConfig()
	}
	n, err := newNode(s, logger, opts)
	if err != nil {
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		return nil, err
	}
	select {
	case <-n.Opened():
	case <-time.After(60 * time.Second):
		return nil, errors.New("bench server: node did not open for traffic within 60 s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n, nil
}

// benchNodeControl adds the muster-only control endpoints.
func benchNodeControl(ctl *http.ServeMux, n *Node) {
	ctl.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"opened":    n.ready(),
			"peers":     len(n.rep.Peers()),
			"instances": n.reg.Len(),
			"version":   n.reg.Version(),
		})
	})
	ctl.HandleFunc("/snapshot", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		snap := n.reg.Snapshot()
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
			iv, ok := n.reg.Instance(app, id)
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

// benchStartBare serves the ceiling: echo, no middleware, handlers that do
// nothing but answer, on the same paths and with the same http.Server
// settings as a node.
func benchStartBare(ctl *http.ServeMux) (*http.Server, string, error) {
	type blob struct {
		body                       []byte
		contentType, contentCoding string
	}
	var mu sync.RWMutex
	blobs := map[string]blob{}
	ctl.HandleFunc("/body", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		blobs[r.URL.Query().Get("path")] = blob{b, r.Header.Get("Content-Type"), r.Header.Get("X-Content-Encoding")}
		mu.Unlock()
	})
	serveBlob := func(c echo.Context) error {
		mu.RLock()
		b, ok := blobs[c.Request().URL.Path]
		mu.RUnlock()
		if !ok {
			return c.NoContent(http.StatusNotFound)
		}
		if b.contentCoding != "" {
			c.Response().Header().Set(echo.HeaderContentEncoding, b.contentCoding)
			c.Response().Header().Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
		}
		return c.Blob(http.StatusOK, b.contentType, b.body)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.PUT("/eureka/apps/:app/:id", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.PUT("/eureka/apps/:app/:id/status", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.POST("/eureka/apps/:app", func(c echo.Context) error {
		_, _ = io.Copy(io.Discard, c.Request().Body)
		return c.NoContent(http.StatusNoContent)
	})
	e.GET("/eureka/apps", serveBlob)
	e.GET("/eureka/apps/delta", serveBlob)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}

// benchMem is a bench server's memory after GC.
type benchMem struct {
	HeapAlloc  uint64 `json:"heapAlloc"`  // live heap after two GCs
	HeapInuse  uint64 `json:"heapInuse"`  // spans in use
	HeapSys    uint64 `json:"heapSys"`    // heap obtained from the OS
	RSS        uint64 `json:"rss"`        // VmRSS
	Goroutines int    `json:"goroutines"` // for sanity
}

func benchReadMem(free bool) benchMem {
	runtime.GC()
	runtime.GC()
	if free {
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return benchMem{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, HeapSys: ms.HeapSys,
		RSS: benchRSS(), Goroutines: runtime.NumGoroutine()}
}

// benchRSS reads VmRSS of this process from /proc/self/status (bytes; 0
// where there is no /proc).
func benchRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// benchProcessCPU is the user+system CPU time of this process.
func benchProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
