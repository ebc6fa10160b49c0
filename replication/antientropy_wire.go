package replication

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The anti-entropy wire, between Muster peers only (a Java Eureka server
// answers 404, and is left to Eureka's own repair). Two signed POSTs under
// the peer namespace, JSON both ways:
//
//	POST {peer}peerreplication/digest
//	  {"root":R}                 → {"root":R'}                 (in sync: R = R')
//	                             → {"root":R', "apps":{"APP":D,…}}
//	  {"root":R,"apps":["APP",…]} → {"root":R', "entries":{"APP":[
//	                                   {"id":"i-1","v":V,"d":D,"live":true},
//	                                   {"id":"i-2","v":V,"tomb":true}, …]}}
//	POST {peer}peerreplication/copies
//	  {"keys":[{"app":"APP","id":"i-1"},…]}
//	                             → {"copies":[{"instance":{…Eureka instance body…},
//	                                   "v":V,"renewed":ms,"live":true}, …]}
//
// Digests and versions are JSON numbers (unsigned 64-bit). Two nodes in
// sync exchange one small object each way per round; a round that finds
// differences asks for the app digests (O(apps)), then the entries of the
// differing apps only, then the copies it lacks.

// Bounds of one anti-entropy request: a larger one is refused with 400 by
// the receiving node, so the asking side splits its requests to fit.
const (
	MaxDigestApps = 256
	MaxCopyKeys   = 500
)

// DigestRequest asks a peer for its digests.
type DigestRequest struct {
	// Root is the asking node's root digest: a peer with the same root
	// answers only its root.
	Root uint64 `json:"root"`
	// Apps, when set, asks for the entries of these apps (upper-cased
	// names) instead of the app digests.
	Apps []string `json:"apps,omitempty"`
}

// DigestReply is a peer's answer to a DigestRequest.
type DigestReply struct {
	Root uint64 `json:"root"`
	// AppDigests holds every app's digest when the roots differ and no
	// apps were asked for.
	AppDigests map[string]uint64 `json:"apps,omitempty"`
	// Entries holds, for each app asked for, its instances and tombstones.
	Entries map[string][]Entry `json:"entries,omitempty"`
}

// Entry is one instance or tombstone of an app, as anti-entropy compares
// them (registry.DigestEntry on the wire).
type Entry struct {
	ID        string `json:"id"`
	Version   uint64 `json:"v"`
	Digest    uint64 `json:"d,omitempty"`
	Live      bool   `json:"live,omitempty"`
	Tombstone bool   `json:"tomb,omitempty"`
}

type copiesRequest struct {
	Keys []wireKey `json:"keys"`
}

type wireKey struct {
	App string `json:"app"`
	ID  string `json:"id"`
}

type copiesReply struct {
	Copies []wireCopy `json:"copies"`
}

type wireCopy struct {
	Instance json.RawMessage `json:"instance"`
	Version  uint64          `json:"v"`
	Renewed  int64           `json:"renewed"` // ms since epoch
	Live     bool            `json:"live,omitempty"`
}

// DigestSource is what a node serves anti-entropy from: its registry.
// *registry.Registry implements it.
type DigestSource interface {
	RootDigest() uint64
	AppDigests(map[string]uint64) map[string]uint64
	AppEntries(app string, buf []registry.DigestEntry) []registry.DigestEntry
	Copy(app, id string) (registry.VersionedCopy, bool)
}

var _ DigestSource = (*registry.Registry)(nil)

// ErrBadRequest wraps every reason an anti-entropy request is refused as a
// whole (unreadable, too many apps or keys); the HTTP layer answers 400.
var ErrBadRequest = errors.New("replication: bad anti-entropy request")

// AnswerDigest answers a DigestRequest (the body of POST
// peerreplication/digest) from src.
func AnswerDigest(src DigestSource, body []byte) ([]byte, error) {
	var req DigestRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	reply, err := answerDigest(src, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(reply)
}

func answerDigest(src DigestSource, req DigestRequest) (DigestReply, error) {
	if len(req.Apps) > MaxDigestApps {
		return DigestReply{}, fmt.Errorf("%w: %d apps asked for, at most %d", ErrBadRequest, len(req.Apps), MaxDigestApps)
	}
	reply := DigestReply{Root: src.RootDigest()}
	if len(req.Apps) > 0 {
		reply.Entries = make(map[string][]Entry, len(req.Apps))
		var buf []registry.DigestEntry
		for _, app := range req.Apps {
			buf = src.AppEntries(app, buf[:0])
			es := make([]Entry, len(buf))
			for i, e := range buf {
				es[i] = Entry{ID: e.ID, Version: e.Version, Digest: e.Digest, Live: e.Live, Tombstone: e.Tombstone}
			}
			reply.Entries[app] = es
		}
		return reply, nil
	}
	if reply.Root != req.Root {
		reply.AppDigests = src.AppDigests(nil)
	}
	return reply, nil
}

// AnswerCopies answers POST peerreplication/copies from src: the stored
// copies of the keys asked for that exist here (missing ones are left
// out).
func AnswerCopies(src DigestSource, body []byte) ([]byte, error) {
	var req copiesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if len(req.Keys) > MaxCopyKeys {
		return nil, fmt.Errorf("%w: %d keys asked for, at most %d", ErrBadRequest, len(req.Keys), MaxCopyKeys)
	}
	reply := copiesReply{Copies: make([]wireCopy, 0, len(req.Keys))}
	for _, k := range req.Keys {
		c, ok := src.Copy(k.App, k.ID)
		if !ok {
			continue
		}
		reply.Copies = append(reply.Copies, wireCopy{
			Instance: wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: c.Instance, LastRenewalTimestamp: c.LastRenewal.UnixMilli()}),
			Version:  c.Instance.WriteVersion,
			Renewed:  c.LastRenewal.UnixMilli(),
			Live:     c.Live,
		})
	}
	return json.Marshal(reply)
}

// DecodeCopies reads an AnswerCopies body (HTTPTransport and the
// in-memory network of replicationtest).
func DecodeCopies(body []byte) ([]registry.VersionedCopy, error) {
	var reply copiesReply
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	out := make([]registry.VersionedCopy, 0, len(reply.Copies))
	for _, c := range reply.Copies {
		in, err := wire.DecodeInstanceBodyJSON(c.Instance)
		if err != nil {
			return nil, fmt.Errorf("decode copy: %w", err)
		}
		in.WriteVersion = c.Version
		out = append(out, registry.VersionedCopy{Instance: in, LastRenewal: time.UnixMilli(c.Renewed), Live: c.Live})
	}
	return out, nil
}

// EncodeCopiesRequest writes the body of POST peerreplication/copies.
func EncodeCopiesRequest(keys []registry.InstanceKey) ([]byte, error) {
	req := copiesRequest{Keys: make([]wireKey, len(keys))}
	for i, k := range keys {
		req.Keys[i] = wireKey{App: k.App, ID: k.ID}
	}
	return json.Marshal(req)
}

// ErrNoAntiEntropy means the peer does not serve anti-entropy (it answered
// 404: a Java Eureka server, or an older Muster).
var ErrNoAntiEntropy = errors.New("replication: peer does not serve anti-entropy")

// Digest implements Transport: POST {peer}peerreplication/digest.
func (t *HTTPTransport) Digest(ctx context.Context, p Peer, req DigestRequest) (DigestReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return DigestReply{}, err
	}
	resp, err := t.postPeer(ctx, p, "peerreplication/digest", body)
	if err != nil {
		return DigestReply{}, err
	}
	var reply DigestReply
	if err := json.Unmarshal(resp, &reply); err != nil {
		return DigestReply{}, fmt.Errorf("digest from %s: %w", p.Name, err)
	}
	return reply, nil
}

// Copies implements Transport: POST {peer}peerreplication/copies.
func (t *HTTPTransport) Copies(ctx context.Context, p Peer, keys []registry.InstanceKey) ([]registry.VersionedCopy, error) {
	body, err := EncodeCopiesRequest(keys)
	if err != nil {
		return nil, err
	}
	resp, err := t.postPeer(ctx, p, "peerreplication/copies", body)
	if err != nil {
		return nil, err
	}
	return DecodeCopies(resp)
}

// AntiEntropyBytes is the sum of the anti-entropy request and answer
// bodies this transport sent and received (uncompressed), for benchmarks
// and tests: two nodes in sync exchange a few dozen bytes per round.
func (t *HTTPTransport) AntiEntropyBytes() uint64 { return t.aeBytes.Load() }

// postPeer posts a signed JSON body to a peer and returns the 200 answer;
// 404 is ErrNoAntiEntropy, any other status a *StatusError.
func (t *HTTPTransport) postPeer(ctx context.Context, p Peer, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, joinURL(p.URL, path), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderReplication, "true")
	req.Header.Set("User-Agent", "Muster-Replication")
	if t.sign != nil {
		t.sign(req, body)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, t.maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read %s answer from %s: %w", path, p.Name, err)
	}
	t.aeBytes.Add(uint64(len(body) + len(respBody)))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s: %w", p.Name, ErrNoAntiEntropy)
	case resp.StatusCode != http.StatusOK:
		return nil, &StatusError{Code: resp.StatusCode}
	}
	return respBody, nil
}
