package replication

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
)

// encodingTransport is what HTTPTransport does around the network: encode
// the batch, and read an all-200 answer.
type encodingTransport struct{ Transport }

func (encodingTransport) Send(_ context.Context, _ Peer, b Batch) (BatchResult, error) {
	if _, err := EncodeBatch(b); err != nil {
		return BatchResult{}, err
	}
	return DecodeBatchResponse([]byte(`{"responseList":[` + strings.Repeat(`{"statusCode":200},`, len(b.Tasks)-1) + `{"statusCode":200}]}`))
}

// BenchmarkSender_heartbeats is a node's side of replicating its clients'
// heartbeats to two Muster peers, the network left out: 600 client
// renewals (a 100 ms take at 6,000 a second) over a registry of 10k,
// taken by the feed, queued for both peers, batched, encoded and their
// answers read. ns/item-peer is the cost per heartbeat and peer (the
// renewals themselves included).
func BenchmarkSender_heartbeats(b *testing.B) {
	reg, stored := benchRegistry(b, 10_000)
	cfg := DefaultConfig()
	cfg.Store = reg
	cfg.Transport = encodingTransport{}
	cfg.Logger = zerolog.Nop()
	r, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r.SetPeers([]Peer{{Name: "b", URL: "http://b/", Muster: true}, {Name: "c", URL: "http://c/", Muster: true}})
	r.mu.Lock()
	r.publishViewLocked()
	ps := make([]*peer, 0, len(r.peers))
	for _, p := range r.peers {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	const take = 600
	var fb feedBuffers
	ctx := context.Background()
	b.ReportAllocs()
	n, i := 0, 0
	start := time.Now()
	for b.Loop() {
		for range take {
			in := stored[i%len(stored)]
			i++
			if _, err := reg.Apply(registry.RenewOp(in.App, in.ID())); err != nil {
				b.Fatal(err)
			}
		}
		r.pull(&fb, true)
		for _, p := range ps {
			now := time.Now()
			p.takeInbox(now)
			for {
				f, _ := p.step(now)
				if f == nil {
					break
				}
				p.onResult(p.send(ctx, f), now)
			}
		}
		n += take * len(ps)
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "ns/item-peer")
}
