package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/muster-registry/muster/client"
	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
)

// startExampleNode runs a Muster node in-process on a loopback port and
// returns its Eureka base URL and a function that stops it.
func startExampleNode() (url string, stop func()) {
	reg, err := registry.New(registry.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	reg.OpenForTraffic()
	cfg := httpapi.DefaultConfig()
	cfg.Registry = reg
	srv, err := httpapi.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	return ts.URL + "/eureka/", ts.Close
}

// A service registers itself, stays registered (the Registration sends
// heartbeats) and cancels its registration when it shuts down.
func Example() {
	url, stop := startExampleNode()
	defer stop()

	cfg := client.DefaultConfig()
	cfg.Servers = []client.Server{{URL: url}} // e.g. http://user:pass@eureka-a:8761/eureka/
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := c.Register(ctx, client.Instance{
		App: "orders", HostName: "orders-1.internal", IPAddr: "10.0.0.7", Port: 8080, Zone: "eu-west-1a",
	})
	if err != nil {
		log.Fatal(err)
	}

	apps, err := c.Fetch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, in := range apps["ORDERS"] {
		fmt.Println(in.ID, in.Status, in.Zone)
	}

	if err := reg.Close(); err != nil { // on shutdown: DELETE at the server
		log.Fatal(err)
	}
	apps, _ = c.Fetch(ctx)
	fmt.Println("after Close:", len(apps["ORDERS"]))
	// Output:
	// orders-1.internal:orders:8080 UP eu-west-1a
	// after Close: 0
}

// Watch delivers the instances of one app now and after every change. This
// server does not hold requests, so the watch polls (every 20 ms here, to
// keep the example short); against a server that answers with
// X-Muster-Index it would use blocking fetches instead.
func ExampleClient_Watch() {
	url, stop := startExampleNode()
	defer stop()

	cfg := client.DefaultConfig()
	cfg.Servers = []client.Server{{URL: url}}
	cfg.PollInterval = 20 * time.Millisecond
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	updates, err := c.Watch(ctx, "billing")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("now:", len(<-updates), "instances")

	reg, err := c.Register(ctx, client.Instance{App: "billing", HostName: "billing-1", IPAddr: "10.0.0.8", Port: 9000})
	if err != nil {
		log.Fatal(err)
	}
	list := <-updates
	fmt.Println("after a registration:", list[0].ID, list[0].Status)

	if err := reg.SetStatus(ctx, client.StatusDown); err != nil {
		log.Fatal(err)
	}
	list = <-updates
	fmt.Println("after a status change:", list[0].ID, list[0].Status)

	_ = reg.Close()
	fmt.Println("after Close:", len(<-updates), "instances")
	// Output:
	// now: 0 instances
	// after a registration: billing-1:billing:9000 UP
	// after a status change: billing-1:billing:9000 DOWN
	// after Close: 0 instances
}

// Servers are listed with their zones; the client uses those of its own
// zone first. Credentials in a URL become HTTP basic auth.
func ExampleParseServers() {
	list, err := client.ParseServers("zone-a=http://svc:secret@eureka-a:8761/eureka/,zone-b=http://eureka-b:8761/eureka/")
	if err != nil {
		log.Fatal(err)
	}
	cfg := client.DefaultConfig()
	cfg.Servers = list
	cfg.Zone = "zone-b"
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(list), "servers; first asked:", c.CurrentServer().URL)
	// Output:
	// 2 servers; first asked: http://eureka-b:8761/eureka/
}
