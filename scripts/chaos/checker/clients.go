package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sync"
	"time"
)

// inst is one simulated Eureka client: it registers, renews every second
// through its current node, registers again on a 404 and fails over to the
// next node when its node does not answer.
type inst struct {
	app, id string
	fleet   bool

	mu          sync.Mutex
	registered  bool // the client is alive and renewing
	node        int
	meta        string // the client's own metadata k, sent when it registers
	lastNode    int    // node of the writer's last operation on it
	lastDirty   int64
	cancelledAt time.Duration // invoke time of the client's last cancel
	hold        time.Duration // how long it stays away after it
}

func (i *inst) key() string { return i.app + "/" + i.id }

func (r *run) registerBody(i *inst) []byte {
	ip := fmt.Sprintf("10.99.%d.%d", len(i.id), len(r.insts))
	body := map[string]any{"instance": map[string]any{
		"instanceId":       i.id,
		"hostName":         i.id + ".chk",
		"app":              i.app,
		"ipAddr":           ip,
		"status":           "UP",
		"overriddenstatus": "UNKNOWN",
		"port":             map[string]any{"$": 8080, "@enabled": "true"},
		"securePort":       map[string]any{"$": 443, "@enabled": "false"},
		"dataCenterInfo": map[string]any{
			"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
		"leaseInfo":          map[string]any{"renewalIntervalInSecs": 1, "durationInSecs": 6},
		"metadata":           map[string]string{"k": i.meta},
		"vipAddress":         i.app,
		"lastDirtyTimestamp": fmt.Sprint(i.lastDirty),
	}}
	b, _ := json.Marshal(body)
	return b
}

func (r *run) instURL(n int, i *inst) string {
	return fmt.Sprintf("%s/eureka/apps/%s/%s", r.nodes[n].url(), i.app, i.id)
}

// register sends a registration through node n; i.mu held.
func (r *run) register(i *inst, n int, by string) *Op {
	i.lastDirty = max(time.Now().UnixMilli(), i.lastDirty+1)
	o := &Op{Kind: "register", By: by, App: i.app, ID: i.id, Node: n, Value: i.meta}
	return r.h.do(o, http.MethodPost, fmt.Sprintf("%s/eureka/apps/%s", r.nodes[n].url(), i.app), r.registerBody(i))
}

// heartbeatLoop renews i every second while it is registered.
func (r *run) heartbeatLoop(ctx context.Context, i *inst, rng *rand.Rand) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		i.mu.Lock()
		if i.registered {
			r.renew(i)
		}
		i.mu.Unlock()
	}
}

// renew is one renewal round: a heartbeat, a registration after a 404, a
// failover to the next node (and one more try there) when the node fails.
func (r *run) renew(i *inst) {
	for try := 0; try < 2; try++ {
		url := fmt.Sprintf("%s?status=UP&lastDirtyTimestamp=%d", r.instURL(i.node, i), i.lastDirty)
		o := r.h.do(&Op{Kind: "heartbeat", By: byOf(i), App: i.app, ID: i.id, Node: i.node}, http.MethodPut, url, nil)
		switch {
		case o.Out == OK:
			return
		case o.Code == 404:
			if ro := r.register(i, i.node, "client"); ro.Out == OK {
				return
			}
		}
		i.node = i.node%3 + 1 // fail over among n1..n3
	}
}

func byOf(i *inst) string {
	if i.fleet {
		return "fleet"
	}
	return "writer"
}

// writer does random operations on the writer's instances through random
// nodes (any node that may be up, both sides of any partition).
func (r *run) writer(ctx context.Context, rng *rand.Rand) {
	var ws []*inst
	for _, i := range r.insts {
		if !i.fleet {
			ws = append(ws, i)
		}
	}
	seq := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(150+rng.Intn(350)) * time.Millisecond):
		}
		r.gate.Lock() // held by the main loop while it checks a heal
		seq++
		r.writeOne(rng, ws, seq)
		r.gate.Unlock()
	}
}

// writeOne is one random operation of the writer.
func (r *run) writeOne(rng *rand.Rand, ws []*inst, seq int) {
	now := r.h.now()
	// A client that cancelled stays away for a while (5–50 s) before it
	// registers again, so a resurrection has time to show.
	var i *inst
	for try := 0; try < 10; try++ {
		i = ws[rng.Intn(len(ws))]
		i.mu.Lock()
		away := !i.registered && now < i.cancelledAt+i.hold
		i.mu.Unlock()
		if !away {
			break
		}
		i = nil
	}
	if i == nil {
		return
	}
	n := r.randomNode(rng)
	if side := r.splitSide(); side != nil {
		// Split brain: each write to an instance goes to the other side
		// from its last one, so both sides write it.
		for side[n] == side[i.lastNode] {
			n = 1 + rng.Intn(3)
		}
	}
	i.lastNode = n
	val := fmt.Sprintf("%d", seq)
	p := rng.Intn(100)
	i.mu.Lock()
	defer i.mu.Unlock()
	switch {
	case !i.registered || p < 10:
		// (Re-)registration, with a new value of the client's own
		// metadata: the client starts (or keeps) renewing.
		i.meta = "r" + val
		o := r.register(i, n, "writer")
		if o.Out != Fail || i.registered {
			i.registered = true
			i.node = n
		}
	case p < 18:
		// The client cancels: it stops renewing first.
		i.registered = false
		i.cancelledAt = r.h.now()
		i.hold = time.Duration(5+rng.Intn(46)) * time.Second
		r.h.do(&Op{Kind: "cancel", By: "writer", App: i.app, ID: i.id, Node: n}, http.MethodDelete, r.instURL(n, i), nil)
	case p < 24:
		// An operator cancels a live client, which keeps renewing and
		// registers again when a node answers its heartbeat with 404.
		r.h.do(&Op{Kind: "cancel", By: "operator", App: i.app, ID: i.id, Node: n}, http.MethodDelete, r.instURL(n, i), nil)
	case p < 50:
		r.h.do(&Op{Kind: "override", By: "operator", App: i.app, ID: i.id, Node: n, Value: "OUT_OF_SERVICE"},
			http.MethodPut, r.instURL(n, i)+"/status?value=OUT_OF_SERVICE", nil)
	case p < 75:
		r.h.do(&Op{Kind: "unoverride", By: "operator", App: i.app, ID: i.id, Node: n, Value: "UP"},
			http.MethodDelete, r.instURL(n, i)+"/status?value=UP", nil)
	default:
		r.h.do(&Op{Kind: "metadata", By: "operator", App: i.app, ID: i.id, Node: n, Value: "m" + val},
			http.MethodPut, r.instURL(n, i)+"/metadata?k=m"+val, nil)
	}
}

// randomNode picks n1..n3, or n4 while it is part of the cluster.
func (r *run) randomNode(rng *rand.Rand) int {
	if r.nodes[4].running() && rng.Intn(4) == 0 {
		return 4
	}
	return 1 + rng.Intn(3)
}

// reader polls one node's GET /eureka/apps every 200 ms.
func (r *run) reader(ctx context.Context, n int) {
	c := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if !r.nodes[n].running() {
			continue
		}
		rd, err := r.readOnce(c, n)
		if err != nil {
			r.h.mu.Lock()
			r.h.failedReads[n]++
			r.h.mu.Unlock()
			continue
		}
		r.h.addRead(rd)
	}
}

func (r *run) readOnce(c *http.Client, n int) (*Read, error) {
	req, _ := http.NewRequest(http.MethodGet, r.nodes[n].url()+"/eureka/apps", nil)
	req.Header.Set("Accept", "application/json")
	inv := r.h.now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d", resp.StatusCode)
	}
	m, err := parseApps(body)
	if err != nil {
		return nil, err
	}
	return &Read{Node: n, Invoke: inv, Ack: r.h.now(), Insts: m}, nil
}
