package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// The control of the xds scenario serves the fleet's and the probe's
// assignments to the bench's own clients, and a registration reaches them.
func TestXDSControlPushesAProbeRegistration(t *testing.T) {
	x, err := startXDSControl("127.0.0.1:0", 200)
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
		t.Fatal("no first response from the control")
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
}

func TestXDSCLANameReadsTheNameOnly(t *testing.T) {
	b, err := proto.Marshal(xdsControlFleetCLA(100, 150))
	if err != nil {
		t.Fatal(err)
	}
	if n := xdsCLAName(b); n != benchVIP(100) {
		t.Fatalf("name %q, want %q", n, benchVIP(100))
	}
	if n := xdsCLAName([]byte{0xff}); n != "" {
		t.Fatalf("name %q of garbage", n)
	}
}
