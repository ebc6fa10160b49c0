package replication

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The JSON of POST /peerreplication/batch, as Eureka's ReplicationList,
// ReplicationInstance, ReplicationListResponse and ReplicationInstanceResponse
// (eureka-core cluster/protocol) write it, so a Muster node and a Java
// Eureka server can replicate with each other.

type replicationList struct {
	ReplicationList []replicationItem `json:"replicationList"`
}

type replicationItem struct {
	AppName            string          `json:"appName"`
	ID                 string          `json:"id"`
	LastDirtyTimestamp *flexInt        `json:"lastDirtyTimestamp,omitempty"` // ms since epoch
	OverriddenStatus   string          `json:"overriddenStatus,omitempty"`
	Status             string          `json:"status,omitempty"`
	InstanceInfo       json.RawMessage `json:"instanceInfo,omitempty"` // bare instance, no "instance" wrapper
	Action             string          `json:"action"`
	// Version is the write version of the change (registry.Instance.
	// WriteVersion; for a cancel, its tombstone's), sent only to Muster
	// peers (Batch.Versioned): Eureka's ReplicationInstance has no such
	// property, and whether a Java server's Jackson mapper ignores unknown
	// ones depends on its set-up.
	Version uint64 `json:"version,omitempty"`
	// LeaseDurationInSecs is, for a cancel sent to a Muster peer, the
	// cancelled instance's lease duration: a peer that never had the
	// instance keeps its tombstone for that lease (up to a day), not for
	// the default 90 s, so a stale copy elsewhere cannot outlive it.
	LeaseDurationInSecs uint32 `json:"leaseDurationInSecs,omitempty"`
	// Health is the health checks' mark of instanceInfo
	// (registry.Instance.Health), sent only to Muster peers beside the
	// version: it is part of the copy that version names. Items that carry
	// it are rare and take the encoding/json path (batch_fast.go).
	Health *wireHealth `json:"health,omitempty"`
	// Pieces are instanceInfo's pieces and their versions
	// (registry.Instance.Pieces), sent with the version to Muster peers:
	// the receiver merges the copy piece by piece. Rare (an override, a
	// metadata write, a mark), so such items take the encoding/json path.
	Pieces *wire.Pieces `json:"pieces,omitempty"`
}

// wireHealth is registry.HealthMark between Muster nodes.
type wireHealth struct {
	Reason string `json:"reason,omitempty"`
	Since  int64  `json:"since,omitempty"` // ms since epoch
	By     string `json:"by,omitempty"`
	Hides  bool   `json:"hides,omitempty"`
}

func healthToWire(h *registry.HealthMark) *wireHealth {
	if h == nil {
		return nil
	}
	return &wireHealth{Reason: h.Reason, Since: h.Since, By: h.By, Hides: h.Hides}
}

func (w *wireHealth) mark() *registry.HealthMark {
	if w == nil {
		return nil
	}
	return &registry.HealthMark{Reason: w.Reason, Since: w.Since, By: w.By, Hides: w.Hides}
}

type replicationListResponse struct {
	ResponseList []replicationResponse `json:"responseList"`
}

type replicationResponse struct {
	StatusCode     int             `json:"statusCode"`
	ResponseEntity json.RawMessage `json:"responseEntity,omitempty"`
	// Version is the write version of ResponseEntity, answered only to an
	// item that carried one (a Muster peer).
	Version uint64 `json:"version,omitempty"`
	// Health is ResponseEntity's mark, with Version.
	Health *wireHealth `json:"health,omitempty"`
	// Pieces are ResponseEntity's pieces, with Version.
	Pieces *wire.Pieces `json:"pieces,omitempty"`
}

// flexInt reads a number or a numeric string; Java writes longs as numbers,
// but nothing a peer sends should fail on quoting.
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "null" || s == "" {
		*f = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("lastDirtyTimestamp %s is not a number", b)
	}
	*f = flexInt(v)
	return nil
}

// EncodeBatch writes a batch as Eureka's ReplicationList: the body
// HTTPTransport posts (and the in-memory network of replicationtest).
func EncodeBatch(b Batch) ([]byte, error) {
	out := make([]byte, 0, 64+160*len(b.Tasks))
	out = append(out, `{"replicationList":[`...)
	for i, t := range b.Tasks {
		if i > 0 {
			out = append(out, ',')
		}
		it := itemOf(t, b.Versioned)
		var err error
		if out, err = appendItem(out, &it); err != nil { // batch_fast.go
			return nil, err
		}
	}
	return append(out, "]}"...), nil
}

// itemOf builds the wire item of a task (ReplicationTaskProcessor#
// createReplicationInstanceOf): the full instance only for Register; status,
// lastDirtyTimestamp and, for heartbeats, the override for the rest. For a
// Muster peer (versioned) every item carries the write version, and status
// changes carry the whole instance too, so the receiver stores exactly the
// copy that version names (a Java server ignores instanceInfo there).
func itemOf(t Task, versioned bool) replicationItem {
	it := replicationItem{AppName: t.Key.App, ID: t.Key.ID, Action: string(t.Action)}
	in := t.Instance
	if in == nil {
		return it
	}
	dirty := flexInt(in.LastDirtyTimestamp)
	switch t.Action {
	case registry.ActionRegister:
		it.LastDirtyTimestamp = &dirty
		it.Status = string(in.Status)
		it.InstanceInfo = wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in})
	case registry.ActionHeartbeat:
		it.LastDirtyTimestamp = &dirty
		it.Status = string(in.Status)
		if in.OverriddenStatus != "" && in.OverriddenStatus != registry.StatusUnknown {
			it.OverriddenStatus = string(in.OverriddenStatus)
		}
	case registry.ActionStatusUpdate, registry.ActionDeleteStatusOverride:
		it.LastDirtyTimestamp = &dirty
		it.Status = string(in.Status)
		if versioned {
			it.InstanceInfo = wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in})
		}
	}
	if versioned {
		it.Version = in.WriteVersion
		if len(it.InstanceInfo) > 0 {
			it.Health = healthToWire(in.Health)
			it.Pieces = wire.PiecesOf(in.Pieces)
		} else if t.Action == registry.ActionHeartbeat {
			// The highest version of any piece: a peer missing one asks
			// for the copy (404) or answers with its own (409).
			it.Version = in.CopyVersion()
		}
		if t.Action == registry.ActionCancel && in.LeaseDurationSecs > 0 {
			it.LeaseDurationInSecs = uint32(min(in.LeaseDurationSecs, registry.MaxLeaseDurationSecs))
		}
	}
	return it
}

// taskWireSize is an upper bound of the bytes t adds to an encoded batch:
// the instance body of a Register exactly, plus the item's other fields
// with every character of the key escaped (\u00XX) in the worst case.
func taskWireSize(t *Task) int {
	n := 200 + 6*(len(t.Key.App)+len(t.Key.ID))
	if t.Instance != nil && (t.Action == registry.ActionRegister || t.Action == registry.ActionStatusUpdate || t.Action == registry.ActionDeleteStatusOverride) {
		n += len(wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: t.Instance}))
	}
	return n
}

// DecodeBatchResponse reads a ReplicationListResponse, the answer to a
// batch.
func DecodeBatchResponse(body []byte) (BatchResult, error) {
	if items, ok := scanBatchResponse(body); ok { // batch_fast.go
		return BatchResult{Items: items}, nil
	}

	var resp replicationListResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return BatchResult{}, fmt.Errorf("decode batch response: %w", err)
	}
	res := BatchResult{Items: make([]ItemResult, len(resp.ResponseList))}
	for i, r := range resp.ResponseList {
		res.Items[i].StatusCode = r.StatusCode
		if len(r.ResponseEntity) > 0 && !bytes.Equal(r.ResponseEntity, []byte("null")) {
			// An entity we cannot read costs that item its 409 handling,
			// not the whole batch its answers.
			if in, err := wire.DecodeInstanceBodyJSON(r.ResponseEntity); err == nil {
				in.WriteVersion = r.Version
				in.Health = r.Health.mark()
				in.Pieces = r.Pieces.Registry()
				res.Items[i].Instance = in
			}
		}
	}
	return res, nil
}

// ErrMalformedBatch wraps every reason an inbound batch cannot be read as a
// whole; the HTTP layer answers it with 400.
var ErrMalformedBatch = errors.New("replication: malformed batch")
