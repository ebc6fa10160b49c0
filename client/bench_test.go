package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/internal/testwait"
)

// BenchmarkWatch_blockingDelivery measures the time from a change on a
// server that holds requests (the stub of the blocking protocol) to the
// new list arriving from Watch, over loopback (µs/delivery; ns/op also
// counts the wait for the next held request).
func BenchmarkWatch_blockingDelivery(b *testing.B) {
	stub, url := newAppStub(b, true)
	stub.set("ORDERS", "o-0")
	c, _ := newClient(b, servers(url), func(cfg *client.Config) { cfg.WatchWait = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Watch(ctx, "ORDERS")
	if err != nil {
		b.Fatal(err)
	}
	<-ch
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		testwait.True(b, waitTimeout, "a held request", func() bool { return stub.heldNow() == 1 })
		start := time.Now()
		stub.set("ORDERS", fmt.Sprint("o-", i+1))
		<-ch
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/delivery")
}
