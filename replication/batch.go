package replication

import (
	"errors"

	"github.com/muster-registry/muster/registry/wire"
)

// The batch's bytes are registry/wire's (batch.go, batch_fast.go):
// Eureka's ReplicationList and ReplicationListResponse. Here is only what
// a Task and a Batch are on it.

// EncodeBatch writes a batch as Eureka's ReplicationList: the body
// HTTPTransport posts (and the in-memory network of replicationtest).
func EncodeBatch(b Batch) ([]byte, error) {
	return appendBatch(make([]byte, 0, 64+224*len(b.Tasks)), b)
}

// appendBatch is EncodeBatch into dst (HTTPTransport reuses its buffers).
func appendBatch(dst []byte, b Batch) ([]byte, error) {
	return wire.AppendBatch(dst, len(b.Tasks), func(i int) wire.ReplicationItem {
		t := &b.Tasks[i]
		return wire.ReplicationItemOf(t.Action, t.Key, t.Instance, b.Versioned)
	})
}

// taskWireSize is an upper bound of the bytes t adds to an encoded batch.
func taskWireSize(t *Task) int { return wire.ReplicationItemSize(t.Action, t.Key, t.Instance) }

// DecodeBatchResponse reads a ReplicationListResponse, the answer to a
// batch.
func DecodeBatchResponse(body []byte) (BatchResult, error) {
	items, err := wire.DecodeBatchResponse(body)
	if err != nil {
		return BatchResult{}, err
	}
	return BatchResult{Items: items}, nil
}

// ErrMalformedBatch wraps every reason an inbound batch cannot be read as a
// whole; the HTTP layer answers it with 400.
var ErrMalformedBatch = errors.New("replication: malformed batch")
