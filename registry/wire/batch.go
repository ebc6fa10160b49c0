package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/muster-registry/muster/registry"
)

// The JSON of POST /peerreplication/batch, as Eureka's ReplicationList,
// ReplicationInstance, ReplicationListResponse and ReplicationInstanceResponse
// (eureka-core cluster/protocol) write it, so a Muster node and a Java
// Eureka server can replicate with each other.

type replicationList struct {
	ReplicationList []ReplicationItem `json:"replicationList"`
}

type ReplicationItem struct {
	AppName            string          `json:"appName"`
	ID                 string          `json:"id"`
	LastDirtyTimestamp *FlexInt        `json:"lastDirtyTimestamp,omitempty"` // ms since epoch
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
	Health *Health `json:"health,omitempty"`
	// Pieces are instanceInfo's pieces and their versions
	// (registry.Instance.Pieces), sent with the version to Muster peers:
	// the receiver merges the copy piece by piece. Rare (an override, a
	// metadata write, a mark), so such items take the encoding/json path.
	Pieces *Pieces `json:"pieces,omitempty"`
}

// Health is registry.HealthMark between Muster nodes (HealthOf, Mark).
type Health struct {
	Reason string `json:"reason,omitempty"`
	Since  int64  `json:"since,omitempty"` // ms since epoch
	By     string `json:"by,omitempty"`
	Hides  bool   `json:"hides,omitempty"`
}

func HealthOf(h *registry.HealthMark) *Health {
	if h == nil {
		return nil
	}
	return &Health{Reason: h.Reason, Since: h.Since, By: h.By, Hides: h.Hides}
}

func (w *Health) Mark() *registry.HealthMark {
	if w == nil {
		return nil
	}
	return &registry.HealthMark{Reason: w.Reason, Since: w.Since, By: w.By, Hides: w.Hides}
}

type replicationListResponse struct {
	ResponseList []ReplicationResponse `json:"responseList"`
}

type ReplicationResponse struct {
	StatusCode     int             `json:"statusCode"`
	ResponseEntity json.RawMessage `json:"responseEntity,omitempty"`
	// Version is the write version of ResponseEntity, answered only to an
	// item that carried one (a Muster peer).
	Version uint64 `json:"version,omitempty"`
	// Health is ResponseEntity's mark, with Version.
	Health *Health `json:"health,omitempty"`
	// Pieces are ResponseEntity's pieces, with Version.
	Pieces *Pieces `json:"pieces,omitempty"`
}

// FlexInt reads a number or a numeric string; Java writes longs as numbers,
// but nothing a peer sends should fail on quoting.
type FlexInt int64

func (f *FlexInt) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if s == "null" || s == "" {
		*f = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("lastDirtyTimestamp %s is not a number", b)
	}
	*f = FlexInt(v)
	return nil
}

// AppendBatch appends n items as Eureka's ReplicationList: the body a
// sender posts to POST /peerreplication/batch. item(i) is the i-th item
// (ReplicationItemOf).
func AppendBatch(out []byte, n int, item func(i int) ReplicationItem) ([]byte, error) {
	out = append(out, `{"replicationList":[`...)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		it := item(i)
		var err error
		if out, err = appendItem(out, &it); err != nil { // batch_fast.go
			return nil, err
		}
	}
	return append(out, "]}"...), nil
}

// ReplicationItemOf builds the wire item of one change
// (ReplicationTaskProcessor#createReplicationInstanceOf): the full instance
// only for Register; status, lastDirtyTimestamp and, for heartbeats, the
// override for the rest. For a Muster peer (versioned) every item carries
// the write version, and status changes carry the whole instance too, so
// the receiver stores exactly the copy that version names (a Java server
// ignores instanceInfo there). in may be nil (a cancel without its
// instance).
func ReplicationItemOf(action registry.Action, key registry.InstanceKey, in *registry.Instance, versioned bool) ReplicationItem {
	it := ReplicationItem{AppName: key.App, ID: key.ID, Action: string(action)}
	if in == nil {
		return it
	}
	dirty := FlexInt(in.LastDirtyTimestamp)
	switch action {
	case registry.ActionRegister:
		it.LastDirtyTimestamp = &dirty
		it.Status = string(in.Status)
		it.InstanceInfo = AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in})
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
			it.InstanceInfo = AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in})
		}
	}
	if versioned {
		it.Version = in.WriteVersion
		if len(it.InstanceInfo) > 0 {
			it.Health = HealthOf(in.Health)
			it.Pieces = PiecesOf(in.Pieces)
		} else if action == registry.ActionHeartbeat {
			// The highest version of any piece: a peer missing one asks
			// for the copy (404) or answers with its own (409).
			it.Version = in.CopyVersion()
		}
		switch {
		case action != registry.ActionCancel:
		case registry.IsPersistent(in):
			// Its copies never expire: the tombstone lasts a maximal lease
			// on every node, as on the one that cancelled it.
			it.LeaseDurationInSecs = registry.MaxLeaseDurationSecs
		case in.LeaseDurationSecs > 0:
			it.LeaseDurationInSecs = uint32(min(in.LeaseDurationSecs, registry.MaxLeaseDurationSecs))
		}
	}
	return it
}

// ReplicationItemSize is an upper bound of the bytes one change adds to an
// encoded batch: the instance body of a Register exactly, plus the item's
// other fields with every character of the key escaped (\u00XX) in the
// worst case.
func ReplicationItemSize(action registry.Action, key registry.InstanceKey, in *registry.Instance) int {
	n := 200 + 6*(len(key.App)+len(key.ID))
	if in != nil && (action == registry.ActionRegister || action == registry.ActionStatusUpdate || action == registry.ActionDeleteStatusOverride) {
		n += len(AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in}))
	}
	return n
}

// ItemResult is the outcome of one item of a batch on the peer.
type ItemResult struct {
	// StatusCode is the HTTP status the peer's resource gave the item.
	StatusCode int
	// Instance is the responseEntity: on a heartbeat's 409, the peer's newer
	// copy of the instance. Usually nil.
	Instance *registry.Instance
}

// DecodeBatchResponse reads a ReplicationListResponse, the answer to a
// batch: one result per item, in the batch's order.
func DecodeBatchResponse(body []byte) ([]ItemResult, error) {
	if items, ok := scanBatchResponse(body); ok { // batch_fast.go
		return items, nil
	}

	var resp replicationListResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("decode batch response: %w", err)
	}
	items := make([]ItemResult, len(resp.ResponseList))
	for i, r := range resp.ResponseList {
		items[i].StatusCode = r.StatusCode
		if len(r.ResponseEntity) > 0 && !bytes.Equal(r.ResponseEntity, []byte("null")) {
			// An entity we cannot read costs that item its 409 handling,
			// not the whole batch its answers.
			if in, err := DecodeInstanceBodyJSON(r.ResponseEntity); err == nil {
				in.WriteVersion = r.Version
				in.Health = r.Health.Mark()
				in.Pieces = r.Pieces.Registry()
				items[i].Instance = in
			}
		}
	}
	return items, nil
}

// InboundBatch is a ReplicationList as a receiver read it (DecodeBatch).
type InboundBatch struct {
	// Items are the batch's items in order.
	Items []ReplicationItem
	// Errs holds, when some items could not be read, each item's error
	// (nil for the others): such an item fails alone (400).
	Errs []error
	// slow: the body was read with encoding/json as a whole, and its
	// answer is written with it too.
	slow bool
	// viaJSON counts the items the scanner left to encoding/json.
	viaJSON int
	// pooled is where Items goes back on Release (nil: not pooled).
	pooled *[]ReplicationItem
}

// Release hands the batch's memory back for the next batch: Items must
// not be used after it. A batch never released is simply collected.
func (b *InboundBatch) Release() {
	if b.pooled != nil {
		releaseItems(b.pooled, b.Items)
		b.pooled, b.Items = nil, nil
	}
}

// DecodeBatch reads a ReplicationList, the body of POST
// /peerreplication/batch. The common batch (short ASCII strings and
// integers) is read in one pass (batch_fast.go); an item it is not sure
// about, or a body of another shape, goes to encoding/json, so every
// answer, error or not, is the one encoding/json gives. An item that
// cannot be read fails alone (Errs); an error means the body as a whole
// cannot be read.
func DecodeBatch(body []byte) (*InboundBatch, error) {
	if b, ok := scanBatch(body); ok {
		return b, nil
	}
	return decodeBatchJSON(body)
}

// decodeBatchJSON is DecodeBatch with encoding/json only.
func decodeBatchJSON(body []byte) (*InboundBatch, error) {
	var list struct {
		ReplicationList []json.RawMessage `json:"replicationList"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	if list.ReplicationList == nil {
		return nil, errors.New("no replicationList")
	}
	b := &InboundBatch{Items: make([]ReplicationItem, len(list.ReplicationList)), slow: true}
	for i, raw := range list.ReplicationList {
		if err := json.Unmarshal(raw, &b.Items[i]); err != nil {
			b.Items[i] = ReplicationItem{}
			b.setErr(i, err)
		}
	}
	return b, nil
}

func (b *InboundBatch) setErr(i int, err error) {
	if b.Errs == nil {
		b.Errs = make([]error, len(b.Items))
	}
	b.Errs[i] = err
}

// Err is the error of item i, nil when it was read.
func (b *InboundBatch) Err(i int) error {
	if b.Errs == nil {
		return nil
	}
	return b.Errs[i]
}

// EncodeResponse writes the ReplicationListResponse to the batch: one
// response per item, in order.
func (b *InboundBatch) EncodeResponse(resp []ReplicationResponse) ([]byte, error) {
	if b.slow {
		return json.Marshal(replicationListResponse{ResponseList: resp})
	}
	return appendBatchResponse(make([]byte, 0, 32+20*len(resp)), resp), nil
}
