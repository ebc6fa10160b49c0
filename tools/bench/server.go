package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// ceilingCmd is `bench ceiling`: the best this machine can do, started by
// the bench as a child process beside the node under test (`bench
// node`): echo with no-op routes on the same paths, served by the
// same http.Server settings as a node. It prints one JSON line
// (proccontrol.Ready) on stdout once it serves, and stops when stdin closes
// or on SIGTERM.
//
// Besides the routes, a control listener answers the bench: /cpu, /mem and
// /profile (package proccontrol), and
//
//	POST /body?path=P   bytes the ceiling answers GET P with
//	POST /dialcycles?…  the healthcheck scenario's control (benchDialCycles)
func ceilingCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.String("name", "bench", "name of the server (for its log)")
	hold := fs.Int("hold", 0, "hold a registry of this many fleet instances that the routes never touch: the heap of a node that size, for the route to be measured beside")
	dnsAddr := fs.String("dns", "", "also serve DNS (UDP) on this address with the very answers the node gives its fleet (precomputed per name, only the ID set and the order shuffled): the ceiling of the dns scenario")
	xdsAddr := fs.String("xds", "", "also serve a bare go-control-plane xDS server (ADS) on this address, each POST to /eureka/apps/"+benchXDSProbe+" a new probe endpoint: the control of the xds scenario")
	xdsFleet := fs.Int("xds-fleet", benchXDSFleet, "fleet instances the --xds control serves the assignments of")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dnsAddr != "" {
		dnsSrv, err := dnsCeilingServe(*dnsAddr)
		if err != nil {
			return err
		}
		defer dnsSrv.Shutdown()
	}
	var onPost func(app string) error
	if *xdsAddr != "" {
		x, err := startXDSControl(*xdsAddr, *xdsFleet)
		if err != nil {
			return err
		}
		defer x.stop()
		onPost = func(app string) error {
			if app != benchXDSProbe {
				return nil
			}
			return x.register()
		}
	}
	held, err := benchHoldRegistry(*hold)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(held)

	return serveChild(stdout, func(_ context.Context, ctl *http.ServeMux) (proccontrol.Ready, func(context.Context) error, error) {
		ctl.HandleFunc("POST /dialcycles", benchDialCycles)
		srv, addr, err := benchStartBare(ctl, onPost)
		if err != nil {
			return proccontrol.Ready{}, nil, err
		}
		return proccontrol.Ready{Mode: "bare", PID: os.Getpid(), API: addr}, srv.Shutdown, nil
	})
}

// serveChild is the life of a bench child process: start serves (given a
// context that ends on SIGTERM or when the parent closes our stdin, and the
// control mux with proccontrol's endpoints to add to), then the control
// listener comes up, one JSON line (proccontrol.Ready) goes to stdout, and
// the child runs until the context ends, when both stop.
func serveChild(stdout io.Writer, start func(ctx context.Context, ctl *http.ServeMux) (proccontrol.Ready, func(context.Context) error, error)) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		// The parent holds our stdin: when it goes, so do we.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()

	ctl := http.NewServeMux()
	proccontrol.Handle(ctl)
	info, shutdown, err := start(ctx, ctl)
	if err != nil {
		return err
	}
	var ctlSrv *http.Server
	if info.Control, ctlSrv, err = proccontrol.Serve(ctl); err != nil {
		_ = shutdown(context.Background())
		return err
	}
	line, _ := json.Marshal(info)
	fmt.Fprintf(stdout, "%s\n", line)

	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ctlSrv.Close()
	return shutdown(sctx)
}

// benchHoldRegistry builds a registry of instances [0, n) of the bench
// fleet, decoded as the API decodes them, and settles it as a node that
// has run a while would be: the eviction runs two renewal windows later
// have forgotten the arrivals, the delta is pruned, a snapshot is built.
// That is what a node of that size holds, for the collector to mark and
// the allocator to work around, without anything a request reads. nil
// for n = 0.
func benchHoldRegistry(n int) (*registry.Registry, error) {
	if n == 0 {
		return nil, nil
	}
	now := time.Now()
	cfg := registry.DefaultConfig()
	cfg.Now = func() time.Time { return now }
	r, err := registry.New(cfg)
	if err != nil {
		return nil, err
	}
	keys := make([]registry.InstanceKey, n)
	for i := range n {
		in := benchInstance(i)
		if _, err := r.Apply(registry.RegisterOp(in)); err != nil {
			return nil, err
		}
		keys[i] = registry.InstanceKey{App: in.App, ID: in.ID()}
	}
	for range 2 {
		now = now.Add(cfg.RenewalRateWindow + time.Second)
		for _, k := range keys {
			if _, err := r.Apply(registry.RenewOp(k.App, k.ID)); err != nil {
				return nil, err
			}
		}
		r.EvictExpired()
	}
	// The delta queue pruned, as the 1M node's is when it is measured.
	now = now.Add(cfg.DeltaRetention + time.Second)
	r.PruneDeltas()
	r.Snapshot()
	return r, nil
}

// benchStartBare serves the ceiling: echo, no middleware, handlers that do
// nothing but answer, on the same paths and with the same http.Server
// settings as a node. onPost, if not nil, is called with the app of every
// POST /eureka/apps/:app before it is answered.
func benchStartBare(ctl *http.ServeMux, onPost func(app string) error) (*http.Server, string, error) {
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
		if onPost != nil {
			if err := onPost(c.Param("app")); err != nil {
				return c.String(http.StatusInternalServerError, err.Error())
			}
		}
		return c.NoContent(http.StatusNoContent)
	})
	e.GET("/eureka/apps", serveBlob)
	e.GET("/eureka/apps/delta", serveBlob)
	// A peer's batch read with the node's own codec and every item
	// answered 200, with no registry: what receiving a batch costs a
	// process at all (the replcpu scenario's bare receivers).
	// Its body buffer and answers are reused, as the node's are.
	var bodies sync.Pool
	var answers []wire.ReplicationResponse
	var answersMu sync.Mutex
	e.POST("/eureka/peerreplication/batch", func(c echo.Context) error {
		buf, _ := bodies.Get().(*bytes.Buffer)
		if buf == nil {
			buf = new(bytes.Buffer)
		}
		defer bodies.Put(buf)
		buf.Reset()
		if _, err := buf.ReadFrom(c.Request().Body); err != nil {
			return c.NoContent(http.StatusBadRequest)
		}
		batch, err := wire.DecodeBatch(buf.Bytes())
		if err != nil {
			return c.String(http.StatusBadRequest, err.Error())
		}
		defer batch.Release()
		answersMu.Lock()
		defer answersMu.Unlock()
		for len(answers) < len(batch.Items) {
			answers = append(answers, wire.ReplicationResponse{StatusCode: http.StatusOK})
		}
		out, err := batch.EncodeResponse(answers[:len(batch.Items)])
		if err != nil {
			return c.String(http.StatusInternalServerError, err.Error())
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}
