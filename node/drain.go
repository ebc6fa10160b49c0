package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/replication"
)

// drainer is the node's drain with a receipt, made on first use (the API
// and DNS share it): its reader table, fed by the API's reads, DNS answers
// and xDS acknowledgements, and the receipt asking every replication peer
// for its readers (POST peerreplication/drain-readers, signed as
// anti-entropy is).
func (n *Node) drainer() *drain.Drainer {
	if n.drain == nil {
		n.drain = n.newDrainer()
	}
	return n.drain
}

// noteResolver records a DNS answer of app as a read by the resolver.
func (n *Node) noteResolver(resolver netip.Addr, app string, version uint64) {
	n.drainer().Readers().NoteApp(drain.Reader{Resolver: resolver}, app, version, n.now())
}

// noteXDSAck records an xDS client's acknowledgement of the EDS resources
// names (xds.Name: an app's name in lower case) at version as its read of
// those apps (of every app for a wildcard subscription).
func (n *Node) noteXDSAck(node, addr string, names []string, version uint64) {
	r, now := drain.Reader{Agent: "xds " + node, Address: addr}, n.now()
	readers := n.drainer().Readers()
	if len(names) == 0 {
		readers.NoteAll(r, version, now)
		return
	}
	// Only names of apps: the names are the client's, and a reader's apps
	// must stay bounded by the registry's.
	snap := n.reg.Snapshot()
	for _, name := range names {
		if app, ok := snap.App(name); ok {
			readers.NoteApp(r, app.Name, version, now)
		}
	}
}

// now is the registry's clock.
func (n *Node) now() time.Time {
	if n.regNow != nil {
		return n.regNow()
	}
	return time.Now()
}

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
