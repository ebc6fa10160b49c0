package replication

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Receiver applies inbound batches from peers to the local registry, each
// item as the matching client request would be applied with the
// replication flag set, so none of it is forwarded again.
type Receiver struct {
	reg Applier
	log zerolog.Logger
}

// Applier is what the receiver needs of the registry: one write path.
// *registry.Registry implements it; Apply must be safe for concurrent use.
type Applier interface {
	Apply(registry.Op) (*registry.Instance, error)
}

// NewReceiver returns a receiver applying batches to reg, every item as an
// operation from OriginPeer.
func NewReceiver(reg Applier, logger zerolog.Logger) (*Receiver, error) {
	if reg == nil {
		return nil, errors.New("replication: NewReceiver needs a registry")
	}
	return &Receiver{reg: reg, log: logger.With().Str(logComponent, "replication").Logger()}, nil
}

// Handle decodes a ReplicationList, applies every item in order and returns
// the encoded ReplicationListResponse: one status code per item, in request
// order; a bad item fails alone. An error means the body as a whole could
// not be read; it wraps ErrMalformedBatch.
func (rc *Receiver) Handle(body []byte) ([]byte, error) {
	batch, err := wire.DecodeBatch(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedBatch, err)
	}
	defer batch.Release() // after the answer is encoded: it reads nothing of the items
	rp := responseLists.Get().(*[]wire.ReplicationResponse)
	resp := slices.Grow((*rp)[:0], len(batch.Items))[:len(batch.Items)]
	defer func() { // the answer is encoded by then: it keeps nothing of resp
		if cap(resp) <= 4096 {
			clear(resp)
			*rp = resp[:0]
			responseLists.Put(rp)
		}
	}()
	for i := range batch.Items {
		if err := batch.Err(i); err != nil {
			rc.log.Warn().Err(err).Int(logItem, i).Msg("unreadable replication item")
			resp[i] = wire.ReplicationResponse{StatusCode: http.StatusBadRequest}
			continue
		}
		resp[i] = rc.apply(batch.Items[i])
	}
	return batch.EncodeResponse(resp)
}

// responseLists holds Handle's per-item answers from batch to batch.
var responseLists = sync.Pool{New: func() any { return new([]wire.ReplicationResponse) }}

// apply runs one item; it never panics the batch: a failing item gets its
// own status code (Eureka gives an item that throws 500; here bad input is
// 400).
func (rc *Receiver) apply(it wire.ReplicationItem) (out wire.ReplicationResponse) {
	defer func() {
		if p := recover(); p != nil {
			rc.log.Error().Interface(logPanic, p).Str(logAction, it.Action).Str(logApp, it.AppName).Str(logInstanceID, it.ID).Msg("replicated item panicked")
			out = wire.ReplicationResponse{StatusCode: http.StatusInternalServerError}
		}
	}()
	var dirty int64
	if it.LastDirtyTimestamp != nil {
		dirty = int64(*it.LastDirtyTimestamp)
	}
	var err error
	var in *registry.Instance
	apply := func(op registry.Op) {
		in, err = rc.reg.Apply(op.Dirty(dirty).From(registry.OriginPeer))
	}
	switch registry.Action(it.Action) {
	case registry.ActionRegister:
		if len(it.InstanceInfo) == 0 {
			return wire.ReplicationResponse{StatusCode: http.StatusBadRequest}
		}
		var body *registry.Instance
		if body, err = wire.DecodeInstanceBodyJSON(it.InstanceInfo); err == nil {
			// The instance carries its own lastDirtyTimestamp.
			body.WriteVersion = it.Version
			if it.Version != 0 {
				body.Health = it.Health.Mark()
				body.Pieces = it.Pieces.Registry()
			}
			_, err = rc.reg.Apply(registry.RegisterOp(body).From(registry.OriginPeer))
		}
	case registry.ActionHeartbeat:
		op := registry.RenewOp(it.AppName, it.ID)
		op.Version = it.Version
		if it.OverriddenStatus != "" {
			op.OverriddenStatus = registry.LenientStatus(it.OverriddenStatus)
		}
		apply(op)
		if errors.Is(err, registry.ErrStaleDirtyTimestamp) && in != nil {
			resp := wire.ReplicationResponse{
				StatusCode:     http.StatusConflict,
				ResponseEntity: wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in}),
			}
			if it.Version != 0 {
				resp.Version = in.WriteVersion
				resp.Health = wire.HealthOf(in.Health)
				resp.Pieces = wire.PiecesOf(in.Pieces)
			}
			return resp
		}
	case registry.ActionCancel:
		op := registry.CancelOp(it.AppName, it.ID)
		op.Version = it.Version
		op.LeaseDuration = time.Duration(it.LeaseDurationInSecs) * time.Second
		apply(op)
	case registry.ActionStatusUpdate, registry.ActionDeleteStatusOverride:
		if it.Version != 0 && len(it.InstanceInfo) > 0 {
			// A Muster peer sends the whole copy its write made: stored
			// under the winner rule like any other copy.
			var body *registry.Instance
			if body, err = wire.DecodeInstanceBodyJSON(it.InstanceInfo); err == nil {
				body.WriteVersion = it.Version
				body.Health = it.Health.Mark()
				body.Pieces = it.Pieces.Registry()
				_, err = rc.reg.Apply(registry.RegisterOp(body).From(registry.OriginPeer))
			}
			break
		}
		if registry.Action(it.Action) == registry.ActionDeleteStatusOverride {
			st := registry.StatusUnknown
			if it.Status != "" {
				st, err = registry.ParseStatus(it.Status)
			}
			if err == nil {
				apply(registry.DeleteOverrideOp(it.AppName, it.ID, st))
			}
			break
		}
		var st registry.Status
		if st, err = registry.ParseStatus(it.Status); err == nil {
			apply(registry.StatusOp(it.AppName, it.ID, st))
		}
	default:
		rc.log.Warn().Str(logAction, it.Action).Msg("unknown replication action")
		return wire.ReplicationResponse{StatusCode: http.StatusBadRequest}
	}
	return wire.ReplicationResponse{StatusCode: itemStatus(err)}
}

// itemStatus maps an item's error to the status the matching client
// request would get: the registry's table, and 400 for a body the codec
// cannot read.
func itemStatus(err error) int {
	if errors.Is(err, wire.ErrMalformed) {
		return http.StatusBadRequest
	}
	code, _ := registry.StatusCode(err)
	return code
}
