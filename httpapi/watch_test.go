package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/httpapi/eureka"
	"github.com/muster-registry/muster/internal/testwait"
)

// The watches through the assembled server: its authentication and its
// http.Server's shutdown. The watches themselves are httpapi/eureka's
// tests.

// The watch stream is a read: readers may open it, nobody without
// credentials, and it carries the registry's content only to them.
func TestWatchStream_authAsReads(t *testing.T) {
	n := newSecuredNode(t, "", true)
	t.Cleanup(n.srv.StopWatches)
	if r := n.do(t, "GET", "/eureka/watch", ""); r.Code != 401 {
		t.Fatalf("no credentials: %d", r.Code)
	}
	if r := n.do(t, "GET", "/eureka/watch", "", basic("reader", "wrong")...); r.Code != 401 {
		t.Fatalf("wrong password: %d", r.Code)
	}
	events := openStream(t, n.http.URL+"/eureka/watch", basic("reader", readerPW)...)
	if ev := nextEvent(t, events); ev != "open" {
		t.Fatalf("reader's stream: first event %q", ev)
	}
	if r := n.do(t, "GET", "/eureka/apps?index=0&wait=1s", "", basic("reader", "wrong")...); r.Code != 401 {
		t.Fatalf("blocking fetch without valid credentials: %d", r.Code)
	}
}

// A graceful shutdown of the http.Server that HTTPServer builds answers
// held requests and ends streams at once, instead of waiting out their
// wait (or its own deadline).
func TestWatch_httpServerShutdownReleasesWatchers(t *testing.T) {
	n := newTestNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := n.srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	other := &testNode{srv: n.srv, reg: n.reg, clock: n.clock, http: &httptest.Server{URL: "http://" + ln.Addr().String()}}
	held := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Get(other.http.URL + "/eureka/apps/ORDERS?index=0&wait=60s")
		if err == nil {
			resp.Body.Close()
		}
		held <- resp // nil when it failed
	}()
	events := openStream(t, other.http.URL+"/eureka/watch")
	testwait.True(t, 10*time.Second, "the request is held", func() bool {
		return strings.Contains(n.do(t, "GET", "/metrics", "").Body, "\nmuster_watch_held_requests 1\n")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	select {
	case r := <-held:
		if r == nil || r.StatusCode != 404 || r.Header.Get(eureka.HeaderIndex) != "0" {
			t.Fatalf("held request after shutdown: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was not answered")
	}
	for {
		select {
		case _, open := <-events:
			if !open {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream did not end")
		}
	}
}

// openStream opens a watch stream at url; the names of its events arrive
// on the channel, which is closed when the stream ends.
func openStream(t *testing.T, url string, headers ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	events := make(chan string, 1024)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- name
			}
		}
	}()
	return events
}

func nextEvent(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return ""
}
