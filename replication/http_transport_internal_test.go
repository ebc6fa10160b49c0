package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// Batches sent at once to several peers, each answered early by a peer
// that has not read the body (413, and the connection goes) or after
// reading it, all arrive whole: Send reuses its batch buffers only once
// net/http is done with them.
func TestHTTPTransport_Send_reusesBuffersSafely(t *testing.T) {
	var mu sync.Mutex
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if strings.HasSuffix(want, "-early") {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err == nil {
			var b *wire.InboundBatch
			if b, err = wire.DecodeBatch(body); err == nil {
				for _, it := range b.Items {
					if it.ID != want {
						err = fmt.Errorf("item %q in a batch of %q", it.ID, want)
						break
					}
				}
				if err == nil {
					resp, _ := b.EncodeResponse(make([]wire.ReplicationResponse, len(b.Items)))
					_, _ = w.Write(resp)
					return
				}
			}
		}
		mu.Lock()
		bad = append(bad, err.Error())
		mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
	}))
	defer srv.Close()
	tr, err := NewHTTPTransport(DefaultHTTPTransportConfig())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id := fmt.Sprintf("i-%d-%d", g, i)
				path := id
				if i%5 == 0 {
					path += "-early"
				}
				n := 1 + (i*37)%300
				var b Batch
				for range n {
					b.Tasks = append(b.Tasks, Task{Action: registry.ActionCancel, Key: registry.InstanceKey{App: "APP", ID: id}})
				}
				_, err := tr.Send(context.Background(), Peer{Name: "p", URL: srv.URL + "/" + path + "/"}, b)
				var se *StatusError
				if early := path != id; early && !(errors.As(err, &se) && se.Code == http.StatusRequestEntityTooLarge) || !early && err != nil {
					t.Errorf("batch %s: %v", path, err)
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("the peer read damaged batches: %s", strings.Join(bad, "; "))
	}
}

// A batch that encodes to the bytes of the one before it (the same round
// to another Muster peer) is encoded once; any difference in its tasks'
// actions, keys, instances or versioning gets bytes of its own.
func TestHTTPTransport_Send_encodesARoundOnceForAllPeers(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[strings.TrimSuffix(r.URL.Path, "peerreplication/batch")] = body
		mu.Unlock()
		b, err := wire.DecodeBatch(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, _ := b.EncodeResponse(make([]wire.ReplicationResponse, len(b.Items)))
		_, _ = w.Write(resp)
	}))
	defer srv.Close()
	tr, err := NewHTTPTransport(DefaultHTTPTransportConfig())
	if err != nil {
		t.Fatal(err)
	}
	a, c := registrytest.NewInstance("APP", "a"), registrytest.NewInstance("APP", "c")
	newerC := registrytest.NewInstance("APP", "c")
	newerC.LastDirtyTimestamp = c.LastDirtyTimestamp + 1000
	round := func(in *registry.Instance, versioned bool) Batch {
		return Batch{Versioned: versioned, Tasks: []Task{
			{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: "APP", ID: "a"}, Instance: a},
			{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: "APP", ID: in.ID()}, Instance: in},
		}}
	}
	sends := []struct {
		path        string
		batch       Batch
		wantEncodes uint64
	}{
		{"/b/", round(c, true), 1},
		{"/c/", round(c, true), 1}, // the same round: b's bytes
		{"/d/", round(c, false), 2},
		{"/e/", round(newerC, false), 3}, // another copy of c
	}
	for _, s := range sends {
		if _, err := tr.Send(context.Background(), Peer{Name: s.path, URL: srv.URL + s.path}, s.batch); err != nil {
			t.Fatalf("send to %s: %v", s.path, err)
		}
		if n := tr.encodes.Load(); n != s.wantEncodes {
			t.Errorf("after the send to %s: %d batches encoded, want %d", s.path, n, s.wantEncodes)
		}
		want, err := EncodeBatch(s.batch)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[s.path], want) {
			t.Errorf("%s received %.200s, want %.200s", s.path, got[s.path], want)
		}
	}
}
