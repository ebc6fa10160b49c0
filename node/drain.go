package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/replication"
)

// newDrainer is the node's drain with a receipt: its reader table, fed by
// the API's reads, and the receipt asking every replication peer for its
// readers (POST peerreplication/drain-readers, signed as anti-entropy is).
func (n *Node) newDrainer() *drain.Drainer {
	k := n.settings.Drain
	peers := func() []drain.Peer {
		var out []drain.Peer
		for _, p := range n.rep.PeerList() {
			out = append(out, drain.Peer{Name: p.Name, URL: p.URL})
		}
		return out
	}
	ask := func(ctx context.Context, p drain.Peer, q drain.Query) (drain.Answer, error) {
		body, err := json.Marshal(q)
		if err != nil {
			return drain.Answer{}, err
		}
		asker, ok := n.transport.(interface {
			DrainReaders(ctx context.Context, p replication.Peer, query []byte) ([]byte, error)
		})
		if !ok {
			return drain.Answer{}, drain.ErrNotServed
		}
		raw, err := asker.DrainReaders(ctx, replication.Peer{Name: p.Name, URL: p.URL}, body)
		if errors.Is(err, replication.ErrNoAntiEntropy) {
			return drain.Answer{}, drain.ErrNotServed
		}
		if err != nil {
			return drain.Answer{}, err
		}
		var a drain.Answer
		if err := json.Unmarshal(raw, &a); err != nil {
			return drain.Answer{}, fmt.Errorf("drain-readers answer from %s: %w", p.Name, err)
		}
		return a, nil
	}
	return drain.New(drain.Config{Registry: n.reg, Readers: drain.NewReaders(k.MaxReaders, k.ReaderWindow),
		Node: n.name, Window: k.ReaderWindow, MaxWait: k.MaxWait, PollInterval: k.PollInterval,
		Peers: peers, Ask: ask, Now: n.regNow, Logger: n.log})
}
