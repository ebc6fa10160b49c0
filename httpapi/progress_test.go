package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

// countingListener hands out connections that count their writes. They
// stay syscall.Conns (the embedded *net.TCPConn), so the server can read
// their acknowledged bytes as it would on a plain connection.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

type countingConn struct {
	*net.TCPConn
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c.(*net.TCPConn), l.writes}, nil
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.TCPConn.Write(p)
}

// Why: on loopback every write costs ~10 µs beyond its bytes, so sending a
// 10k-instance delta (800 KB) in 128 KiB writes cost the server 1.3–1.5×
// the CPU of the same bytes in one write (the delta ran at 0.75–0.8× the
// ceiling). Where the kernel reports acknowledged bytes, a large response
// now goes out in writes of up to 4 MiB, and a watchdog keeps the rule of
// muster.write-chunk-timeout-ms: each 128 KiB must be taken within it, a
// reader slower than that or stalled is dropped, a slow but steady one is
// not.
func TestHostile_largeResponsesInFewWritesKeepTheDeadlineRule(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("acknowledged bytes are read from TCP_INFO (Linux); elsewhere responses are written in 128 KiB pieces")
	}
	const chunkTimeout = 400 * time.Millisecond
	n := newTestNode(t, func(_ *registry.Config, h *httpapi.Config) { h.WriteChunkTimeout = chunkTimeout })
	pad := strings.Repeat("p", 60_000)
	for i := range 200 { // ~12 MB of JSON
		in := registrytest.NewInstance("BIG", fmt.Sprintf("big-%d", i), registrytest.WithMetadata(map[string]string{"pad": pad}))
		if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	hs := n.srv.HTTPServer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(n.srv.LimitListener(countingListener{ln, &writes}))
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-done
	})
	full := len(n.do(t, "GET", "/eureka/apps", "", "Accept", "application/json").Body)

	// fetch reads the registry readEach bytes at a time with pause before
	// each read, from a client whose receive buffer is small, so that the
	// server's writes wait on the reader rather than on loopback buffers.
	smallWindow := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
	}}
	fetch := func(pause time.Duration, readEach int) (int, error) {
		return fetchSlowly(t, smallWindow, ln.Addr().String(), pause, readEach)
	}

	// A fast reader: a handful of writes, not one per 128 KiB (~90).
	writes.Store(0)
	if got, err := fetch(0, 64<<20); err != nil || got != full {
		t.Fatalf("fast reader got %d of %d bytes: %v", got, full, err)
	}
	if w := writes.Load(); w > int64(full/(4<<20))+8 {
		t.Errorf("a %d-byte response took %d writes; want about one per 4 MiB", full, w)
	}
	t.Logf("fast reader: %d bytes in %d writes", full, writes.Load())

	// Slow but steady: 256 KiB per 60 ms (~4 MB/s), ten times the floor of
	// 128 KiB per 400 ms; one 4 MiB write takes ~1 s, several deadlines,
	// which the watchdog moves on as the bytes are taken.
	start := time.Now()
	if got, err := fetch(60*time.Millisecond, 256<<10); err != nil || got != full {
		t.Fatalf("slow but steady reader got %d of %d bytes in %s: %v", got, full, time.Since(start), err)
	}
	t.Logf("slow reader: %d bytes in %s", full, time.Since(start).Round(time.Millisecond))

	// Stalled after the first MiB for three deadlines: dropped.
	d := net.Dialer{}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /eureka/apps HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadFull(resp.Body, make([]byte, 1<<20))
	time.Sleep(3 * chunkTimeout)
	rest, err := io.Copy(io.Discard, resp.Body)
	if err == nil || got+int(rest) >= full {
		t.Fatalf("stalled reader got %d of %d bytes (%v); want it dropped at the write deadline", got+int(rest), full, err)
	}
	t.Logf("stalled reader: dropped after %d bytes (%v)", got+int(rest), err)
}
