package replication

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// Micro-benchmarks of the replication hot path: a node under heartbeat load
// sends full batches (250 items) to every peer, and every peer decodes and
// applies them. tools/bench shows the batch fill under load; these show
// the cost per item on each side.

const benchBatchSize = 250

// benchRegistry returns a registry of n instances, 50 per app, and their
// stored copies.
func benchRegistry(b *testing.B, n int) (*registry.Registry, []*registry.Instance) {
	b.Helper()
	cfg := registry.DefaultConfig()
	cfg.Logger = zerolog.Nop()
	reg, err := registry.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	reg.OpenForTraffic()
	stored := make([]*registry.Instance, n)
	for i := range stored {
		in := registrytest.NewInstance(fmt.Sprintf("APP-%d", i/50), fmt.Sprintf("i-%d", i), registrytest.WithDirty(1718000000000),
			registrytest.WithMetadata(map[string]string{"management.port": "8081", "version": "1.4.2", "zone": "eu-west-1a"}))
		if stored[i], err = reg.Apply(registry.RegisterOp(in)); err != nil {
			b.Fatal(err)
		}
	}
	return reg, stored
}

// benchBatches encodes batches of 250 tasks of action over the stored
// instances, as a peer's sender puts them on the wire (versioned: to a
// Muster peer).
func benchBatches(b *testing.B, action registry.Action, versioned bool, stored []*registry.Instance) [][]byte {
	b.Helper()
	var bodies [][]byte
	for start := 0; start+benchBatchSize <= len(stored); start += benchBatchSize {
		batch := Batch{Versioned: versioned}
		for _, in := range stored[start : start+benchBatchSize] {
			batch.Tasks = append(batch.Tasks, Task{Action: action, Key: registry.InstanceKey{App: in.App, ID: in.ID()}, Instance: in, CreatedAt: time.Now()})
		}
		body, err := EncodeBatch(batch)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	return bodies
}

// BenchmarkReceiver_Handle applies inbound batches of 250 heartbeats and of
// 250 registers to a registry of 10k instances, and of heartbeats with
// their versions as a Muster peer sends them; ns/item is the cost a peer
// pays per replicated change.
func BenchmarkReceiver_Handle(b *testing.B) {
	for _, c := range []struct {
		name      string
		action    registry.Action
		versioned bool
	}{
		{"Heartbeat", registry.ActionHeartbeat, false},
		{"Register", registry.ActionRegister, false},
		{"Heartbeat/versioned", registry.ActionHeartbeat, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			reg, stored := benchRegistry(b, 10_000)
			bodies := benchBatches(b, c.action, c.versioned, stored)
			rc, err := NewReceiver(reg, zerolog.Nop())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bodies[0])))
			b.ReportAllocs()
			start := time.Now()
			n := 0
			for i := 0; b.Loop(); i++ {
				if _, err := rc.Handle(bodies[i%len(bodies)]); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n*benchBatchSize), "ns/item")
		})
	}
}

// BenchmarkEncodeBatch is the sender's side: 250 heartbeats or registers
// encoded as Eureka's ReplicationList.
func BenchmarkEncodeBatch(b *testing.B) {
	for _, action := range []registry.Action{registry.ActionHeartbeat, registry.ActionRegister} {
		b.Run(string(action), func(b *testing.B) {
			_, stored := benchRegistry(b, benchBatchSize)
			var batch Batch
			for _, in := range stored {
				batch.Tasks = append(batch.Tasks, Task{Action: action, Key: registry.InstanceKey{App: in.App, ID: in.ID()}, Instance: in, CreatedAt: time.Now()})
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EncodeBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBatcher_addTake is a peer queue under heartbeat load: tasks for
// 10k instances arrive, and full batches leave.
func BenchmarkBatcher_addTake(b *testing.B) {
	const n = 10_000
	tasks := make([]Task, n)
	now := time.Now()
	for i := range tasks {
		in := registrytest.NewInstance("APP", fmt.Sprintf("i-%d", i))
		tasks[i] = Task{Action: registry.ActionHeartbeat, Key: registry.InstanceKey{App: "APP", ID: in.ID()}, Instance: in, CreatedAt: now}
	}
	bt := newBatcher(10_000, 30*time.Second, 30*time.Second)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bt.add(tasks[i%n], now)
		if bt.len() >= benchBatchSize {
			_ = bt.take(now, benchBatchSize)
		}
	}
}

// BenchmarkScanBatch is the batch fast path alone (registry/wire's
// batch_fast.go, through DecodeBatch and DecodeBatchResponse): the scan of
// 250 heartbeats or registers, and of a peer's all-200 answer.
func BenchmarkScanBatch(b *testing.B) {
	for _, action := range []registry.Action{registry.ActionHeartbeat, registry.ActionRegister} {
		b.Run(string(action), func(b *testing.B) {
			_, stored := benchRegistry(b, 1_000)
			body := benchBatches(b, action, false, stored)[0]
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.DecodeBatch(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("response", func(b *testing.B) {
		body := []byte(`{"responseList":[` + strings.Repeat(`{"statusCode":200},`, benchBatchSize-1) + `{"statusCode":200}]}`)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wire.DecodeBatchResponse(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
