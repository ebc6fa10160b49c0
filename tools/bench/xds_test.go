package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"
)

// The control and the floor of the xds scenario serve the fleet's and the
// probe's assignments to the bench's own clients, and a registration
// reaches them.
func TestXDSControlPushesAProbeRegistration(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "floor:127.0.0.1:0"} {
		t.Run(addr, func(t *testing.T) {
			x, err := startXDSControl(addr, 200)
			if err != nil {
				t.Fatal(err)
			}
			defer x.stop()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan int, 4)
			var responses atomic.Int64
			c, err := xdsBenchDial(ctx, x.addr, 0, 1, 1, 2, &responses, func(k int, _ time.Time) { got <- k })
			if err != nil {
				t.Fatal(err)
			}
			defer c.conn.Close()
			select {
			case <-c.first:
			case <-time.After(20 * time.Second):
				t.Fatal("no first response")
			}
			for want := 1; want <= 2; want++ {
				if err := x.register(); err != nil {
					t.Fatal(err)
				}
				select {
				case k := <-got:
					if k != want {
						t.Fatalf("change %d recorded as %d", want, k)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("change %d never reached the client", want)
				}
			}
		})
	}
}

func TestXDSCLACountReadsNameAndEndpoints(t *testing.T) {
	for _, cla := range []*endpointv3.ClusterLoadAssignment{xdsControlFleetCLA(100, 150), xdsControlProbeCLA(7), {ClusterName: "empty"}} {
		b, err := proto.Marshal(cla)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, l := range cla.GetEndpoints() {
			want += len(l.GetLbEndpoints())
		}
		if n, eps := xdsCLACount(b); n != cla.GetClusterName() || eps != want {
			t.Fatalf("name %q, %d endpoints; want %q, %d", n, eps, cla.GetClusterName(), want)
		}
	}
	if n, eps := xdsCLACount([]byte{0xff}); n != "" || eps != 0 {
		t.Fatalf("name %q, %d endpoints of garbage", n, eps)
	}
}
