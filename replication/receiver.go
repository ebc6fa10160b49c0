package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Receiver applies inbound batches from peers to the local registry, each
// item as the matching client request would be applied with the
// replication flag set, so none of it is forwarded again.
type Receiver struct {
	reg  *registry.Registry
	log  zerolog.Logger
	sync atomic.Pointer[Syncer]
}

// WatchSync makes the receiver tell s about every replicated cancel and
// status change, so that a syncUp in flight can keep them (Syncer).
func (rc *Receiver) WatchSync(s *Syncer) { rc.sync.Store(s) }

// NewReceiver returns a receiver applying batches to reg.
func NewReceiver(reg *registry.Registry, logger zerolog.Logger) *Receiver {
	return &Receiver{reg: reg, log: logger.With().Str("component", "replication").Logger()}
}

// Handle decodes a ReplicationList, applies every item in order and returns
// the encoded ReplicationListResponse: one status code per item, in request
// order; a bad item fails alone. An error means the body as a whole could
// not be read; it wraps ErrMalformedBatch.
func (rc *Receiver) Handle(body []byte) ([]byte, error) {
	var list struct {
		ReplicationList []json.RawMessage `json:"replicationList"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedBatch, err)
	}
	if list.ReplicationList == nil {
		return nil, fmt.Errorf("%w: no replicationList", ErrMalformedBatch)
	}
	resp := replicationListResponse{ResponseList: make([]replicationResponse, len(list.ReplicationList))}
	for i, raw := range list.ReplicationList {
		var it replicationItem
		if err := json.Unmarshal(raw, &it); err != nil {
			rc.log.Warn().Err(err).Int("item", i).Msg("unreadable replication item")
			resp.ResponseList[i] = replicationResponse{StatusCode: http.StatusBadRequest}
			continue
		}
		resp.ResponseList[i] = rc.apply(it)
	}
	return json.Marshal(resp)
}

// apply runs one item; it never panics the batch: a failing item gets its
// own status code (Eureka gives an item that throws 500; here bad input is
// 400).
func (rc *Receiver) apply(it replicationItem) (out replicationResponse) {
	defer func() {
		if p := recover(); p != nil {
			rc.log.Error().Interface("panic", p).Str("action", it.Action).Str("app", it.AppName).Str("instance_id", it.ID).Msg("replicated item panicked")
			out = replicationResponse{StatusCode: http.StatusInternalServerError}
		}
	}()
	var dirty int64
	if it.LastDirtyTimestamp != nil {
		dirty = int64(*it.LastDirtyTimestamp)
	}
	var err error
	var in *registry.Instance
	switch registry.Action(it.Action) {
	case registry.ActionRegister:
		if len(it.InstanceInfo) == 0 {
			return replicationResponse{StatusCode: http.StatusBadRequest}
		}
		if in, err = wire.DecodeInstanceBodyJSON(it.InstanceInfo); err == nil {
			_, err = rc.reg.Register(in, true)
		}
	case registry.ActionHeartbeat:
		hb := registry.Heartbeat{LastDirtyTimestamp: dirty, Replicated: true}
		if it.OverriddenStatus != "" {
			hb.OverriddenStatus = registry.LenientStatus(it.OverriddenStatus)
		}
		in, err = rc.reg.Renew(it.AppName, it.ID, hb)
		if errors.Is(err, registry.ErrStaleDirtyTimestamp) && in != nil {
			return replicationResponse{
				StatusCode:     http.StatusConflict,
				ResponseEntity: wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in}),
			}
		}
	case registry.ActionCancel:
		err = rc.reg.Cancel(it.AppName, it.ID, true)
		rc.noteForSync(registry.ActionCancel, it, "", 0)
	case registry.ActionStatusUpdate:
		var st registry.Status
		if st, err = registry.ParseStatus(it.Status); err == nil {
			_, err = rc.reg.UpdateStatus(it.AppName, it.ID, st, dirty, true)
			rc.noteForSync(registry.ActionStatusUpdate, it, st, dirty)
		}
	case registry.ActionDeleteStatusOverride:
		st := registry.StatusUnknown
		if it.Status != "" {
			st, err = registry.ParseStatus(it.Status)
		}
		if err == nil {
			_, err = rc.reg.DeleteStatusOverride(it.AppName, it.ID, st, dirty, true)
			rc.noteForSync(registry.ActionDeleteStatusOverride, it, st, dirty)
		}
	default:
		rc.log.Warn().Str("action", it.Action).Msg("unknown replication action")
		return replicationResponse{StatusCode: http.StatusBadRequest}
	}
	return replicationResponse{StatusCode: itemStatus(err)}
}

func (rc *Receiver) noteForSync(action registry.Action, it replicationItem, st registry.Status, dirty int64) {
	if s := rc.sync.Load(); s != nil {
		s.ObserveReplicated(action, registry.InstanceKey{App: strings.ToUpper(it.AppName), ID: it.ID}, st, dirty)
	}
}

// itemStatus maps a registry error to the status the matching client
// request would get.
func itemStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, registry.ErrInstanceNotFound), errors.Is(err, registry.ErrStatusUnknown),
		errors.Is(err, registry.ErrNewerDirtyTimestamp):
		return http.StatusNotFound
	case errors.Is(err, registry.ErrStaleDirtyTimestamp):
		return http.StatusConflict
	case errors.Is(err, registry.ErrCapacity):
		return http.StatusServiceUnavailable
	case errors.Is(err, registry.ErrAppFull):
		return http.StatusForbidden
	case errors.Is(err, registry.ErrLimitExceeded):
		return http.StatusBadRequest
	case errors.Is(err, registry.ErrInvalidInstance), errors.Is(err, registry.ErrInvalidStatus), errors.Is(err, wire.ErrMalformed):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
