package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The converge scenario (issue 11): node-c is cut off long enough for the
// replication tasks queued for it to expire and for memberlist to declare
// it dead; both sides change the registry meanwhile; after the heal every
// node must hold the same registry, every client-visible field of every
// instance, within two anti-entropy intervals.
const (
	isolated = "node-c"
	// taskMaxAge is eureka.server.max-time-for-replication, which the chaos
	// cluster leaves at its default.
	taskMaxAge = 30 * time.Second
	// convLease is long enough that no side evicts a test instance whose
	// heartbeats it cannot see during the cut: what the scenario tests is
	// the repair of writes, and an eviction is not one.
	convLease = 90 * time.Second
	// defaultAntiEntropyInterval is muster.anti-entropy-interval-ms's
	// default, for a cluster whose compose file does not set it.
	defaultAntiEntropyInterval = 10 * time.Second
)

// convInst is a test instance: registered, renewed (every second, as the
// fleet's clients do) and cancelled through one node.
type convInst struct {
	app, id string
	via     string // the node it registers and renews through
	// mu guards live and lastDirty, and serializes this instance's heartbeat (and its 404 re-registration)
	// with its cancel, so that a heartbeat in flight cannot register a
	// cancelled instance again.
	mu        sync.Mutex
	live      bool
	lastDirty int64
}

// convergeRun holds the scenario's endpoints and test instances.
type convergeRun struct {
	b    *bench
	r    *report
	base map[string]string // node → https base URL (published port, or the tunnel for the isolated node)
	inst map[string]*convInst

	// statsMu guards renewOK, renewFailed and reregistered.
	statsMu                            sync.Mutex
	renewOK, renewFailed, reregistered int
}

func (c *convergeRun) body(in *convInst) string {
	host := strings.ToLower(in.id) + ".converge.test"
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":%q,"app":%q,"ipAddr":"10.7.%d.%d",
"status":"UP","overriddenStatus":"UNKNOWN",
"port":{"$":8080,"@enabled":"true"},"securePort":{"$":8443,"@enabled":"false"},
"vipAddress":"converge","secureVipAddress":"converge-secure",
"homePageUrl":"http://%s:8080/","statusPageUrl":"http://%s:8080/info","healthCheckUrl":"http://%s:8080/health",
"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
"leaseInfo":{"renewalIntervalInSecs":1,"durationInSecs":%d},
"metadata":{"registeredVia":%q},
"lastDirtyTimestamp":"%d"}}`, in.id, host, in.app, len(in.app), len(c.inst)%250, host, host, host,
		int(convLease.Seconds()), in.via, in.lastDirty)
}

// call sends a request to a node and returns the status code.
func (c *convergeRun) call(method, node, path, body string) int {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base[node]+path, rd)
	if err != nil {
		return 0
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(req)
}

// register adds a test instance through node and keeps it renewing there.
func (c *convergeRun) register(app, id, node string) error {
	in := &convInst{app: app, id: id, via: node, live: true, lastDirty: time.Now().UnixMilli()}
	c.inst[id] = in
	if code := c.call("POST", node, "/eureka/apps/"+app, c.body(in)); code != 204 {
		return fmt.Errorf("register %s through %s: HTTP %d", id, node, code)
	}
	return nil
}

// renewAll is one heartbeat round, as a Eureka client sends it; a 404
// registers the instance again with a newer lastDirtyTimestamp
// (DiscoveryClient#renew).
func (c *convergeRun) renewAll() {
	var wg sync.WaitGroup
	for _, in := range c.inst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.mu.Lock()
			defer in.mu.Unlock()
			if !in.live {
				return
			}
			code := c.call("PUT", in.via, fmt.Sprintf("/eureka/apps/%s/%s?status=UP&lastDirtyTimestamp=%d", in.app, in.id, in.lastDirty), "")
			c.statsMu.Lock()
			defer c.statsMu.Unlock()
			switch code {
			case 200:
				c.renewOK++
			case 404:
				c.reregistered++
				in.lastDirty = max(time.Now().UnixMilli(), in.lastDirty+1)
				c.call("POST", in.via, "/eureka/apps/"+in.app, c.body(in))
			default:
				c.renewFailed++
			}
		}()
	}
	wg.Wait()
}

func (c *convergeRun) heartbeats(ctx context.Context) {
	for ctx.Err() == nil {
		c.renewAll()
		select {
		case <-ctx.Done():
		case <-time.After(renew):
		}
	}
}

// cancel stops an instance's heartbeats and cancels it through node.
func (c *convergeRun) cancel(id, node string) error {
	in := c.inst[id]
	in.mu.Lock()
	defer in.mu.Unlock()
	in.live = false
	if code := c.call("DELETE", node, "/eureka/apps/"+in.app+"/"+id, ""); code != 200 {
		return fmt.Errorf("cancel %s through %s: HTTP %d", id, node, code)
	}
	return nil
}

func (c *convergeRun) override(id, node string) error {
	in := c.inst[id]
	if code := c.call("PUT", node, "/eureka/apps/"+in.app+"/"+id+"/status?value=OUT_OF_SERVICE", ""); code != 200 {
		return fmt.Errorf("OUT_OF_SERVICE override of %s through %s: HTTP %d", id, node, code)
	}
	return nil
}

func (c *convergeRun) removeOverride(id, node string) error {
	in := c.inst[id]
	if code := c.call("DELETE", node, "/eureka/apps/"+in.app+"/"+id+"/status?value=UP", ""); code != 200 {
		return fmt.Errorf("remove the override of %s through %s: HTTP %d", id, node, code)
	}
	return nil
}

func (c *convergeRun) metadata(id, node, key, value string) error {
	in := c.inst[id]
	q := url.Values{key: {value}}.Encode()
	if code := c.call("PUT", node, "/eureka/apps/"+in.app+"/"+id+"/metadata?"+q, ""); code != 200 {
		return fmt.Errorf("metadata %s of %s through %s: HTTP %d", q, id, node, code)
	}
	return nil
}

// registryOf is a node's GET /eureka/apps (JSON, with the admin's
// credentials): instance id → its client-visible fields.
func (c *convergeRun) registryOf(ctx context.Context, node string) (map[string]map[string]any, error) {
	data, err := hostGet(ctx, c.base[node]+"/eureka/apps", "application/json")
	if err != nil {
		return nil, err
	}
	return clientVisible(data)
}

// nodeStamped are the instance fields each node stamps itself (lease
// bookkeeping, the delta's action): they differ between nodes holding
// the same instance and are not compared.
var nodeStamped = []string{"lastUpdatedTimestamp", "actionType"}
var leaseStamped = []string{"registrationTimestamp", "lastRenewalTimestamp", "evictionTimestamp", "serviceUpTimestamp"}

// clientVisible decodes an applications document into instance id → every
// field but the node-stamped ones: id, app, host, addresses, ports,
// status, overriddenStatus, metadata, dataCenterInfo, VIPs, URLs,
// lastDirtyTimestamp, the lease's durations.
func clientVisible(data []byte) (map[string]map[string]any, error) {
	var doc struct {
		Applications struct {
			Application json.RawMessage `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, app := range oneOrMany(doc.Applications.Application) {
		var a struct {
			Name     string          `json:"name"`
			Instance json.RawMessage `json:"instance"`
		}
		if err := json.Unmarshal(app, &a); err != nil {
			return nil, err
		}
		for _, raw := range oneOrMany(a.Instance) {
			var inst map[string]any
			if err := json.Unmarshal(raw, &inst); err != nil {
				return nil, err
			}
			for _, k := range nodeStamped {
				delete(inst, k)
			}
			if lease, ok := inst["leaseInfo"].(map[string]any); ok {
				for _, k := range leaseStamped {
					delete(lease, k)
				}
			}
			id, _ := inst["instanceId"].(string)
			out[a.Name+"/"+id] = inst
		}
	}
	return out, nil
}

// oneOrMany reads Eureka's JSON lists, which may be a single object.
func oneOrMany(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '{' {
		return []json.RawMessage{raw}
	}
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list)
	return list
}

// differences lists, at most max of them, how registry o differs from ref.
func differences(ref, o map[string]map[string]any, max int) []string {
	var out []string
	keys := make([]string, 0, len(ref)+len(o))
	for k := range ref {
		keys = append(keys, k)
	}
	for k := range o {
		if _, ok := ref[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, inA := ref[k]
		b, inB := o[k]
		switch {
		case !inA:
			out = append(out, k+" only here")
		case !inB:
			out = append(out, k+" missing")
		case !reflect.DeepEqual(a, b):
			var fields []string
			for f := range a {
				if !reflect.DeepEqual(a[f], b[f]) {
					fields = append(fields, fmt.Sprintf("%s %v≠%v", f, b[f], a[f]))
				}
			}
			for f := range b {
				if _, ok := a[f]; !ok {
					fields = append(fields, f+" only here")
				}
			}
			sort.Strings(fields)
			out = append(out, k+": "+strings.Join(fields, ", "))
		}
		if len(out) >= max {
			break
		}
	}
	return out
}

// identical fetches every node's registry and says whether they are all
// the same; if so it returns node-a's.
func (c *convergeRun) identical(ctx context.Context) (map[string]map[string]any, string) {
	regs := map[string]map[string]map[string]any{}
	var mu sync.Mutex
	var errs []string
	eachNode(nodes, func(n string) {
		reg, err := c.registryOf(ctx, n)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n, err))
			return
		}
		regs[n] = reg
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, strings.Join(errs, "; ")
	}
	ref := regs[nodes[0]]
	var why []string
	for _, n := range nodes[1:] {
		if d := differences(ref, regs[n], 3); len(d) > 0 {
			why = append(why, fmt.Sprintf("%s vs %s (%d vs %d instances): %s", n, nodes[0], len(regs[n]), len(ref), strings.Join(d, "; ")))
		}
	}
	if len(why) > 0 {
		return nil, strings.Join(why, " | ")
	}
	return ref, ""
}

// peerView is what /admin/status says about a node's peers, read loosely:
// the anti-entropy fields are printed as absent on a build without them.
type peerView struct {
	Name            string `json:"name"`
	State           string `json:"state"`
	InSync          *bool  `json:"inSync"`
	LastAntiEntropy any    `json:"lastAntiEntropy"`
	Repairs         *int64 `json:"repairs"`
}

func (c *convergeRun) peers(ctx context.Context, node string) ([]peerView, error) {
	data, err := hostGet(ctx, c.base[node]+"/admin/status")
	if err != nil {
		return nil, err
	}
	var st struct {
		Peers []peerView `json:"peers"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, err
	}
	return st.Peers, nil
}

func (p peerView) String() string {
	s := p.Name + " " + p.State
	if p.InSync == nil {
		s += " inSync=absent"
	} else {
		s += " inSync=" + strconv.FormatBool(*p.InSync)
	}
	if p.Repairs != nil {
		s += fmt.Sprintf(" repairs=%d", *p.Repairs)
	}
	if p.LastAntiEntropy != nil {
		s += fmt.Sprintf(" lastAntiEntropy=%v", p.LastAntiEntropy)
	}
	return s
}

// peerReport prints every node's peers and says whether every peer of
// every node is in sync.
func (c *convergeRun) peerReport(ctx context.Context, when string) (allInSync bool) {
	allInSync = true
	for _, n := range nodes {
		ps, err := c.peers(ctx, n)
		if err != nil {
			c.r.step("%s: %s peers: %v", when, n, err)
			allInSync = false
			continue
		}
		var parts []string
		for _, p := range ps {
			parts = append(parts, p.String())
			allInSync = allInSync && p.InSync != nil && *p.InSync
		}
		c.r.step("%s: %s peers: %s", when, n, strings.Join(parts, "; "))
	}
	return allInSync
}

// peerState is the state node gives peer in /admin/status ("" if absent).
func (c *convergeRun) peerState(ctx context.Context, node, peer string) string {
	ps, err := c.peers(ctx, node)
	if err != nil {
		return "unreachable"
	}
	for _, p := range ps {
		if p.Name == peer {
			return p.State
		}
	}
	return "absent"
}

// gone says whether a peer state means memberlist gave the peer up (a
// node may also forget a dead peer altogether).
func gone(state string) bool {
	return state == "dead" || state == "left" || state == "absent"
}

// antiEntropyInterval reads muster.anti-entropy-interval-ms from the
// environment the compose files gave node-a.
func (b *bench) antiEntropyInterval(ctx context.Context) (time.Duration, error) {
	id, err := b.container(ctx, "node-a")
	if err != nil {
		return 0, err
	}
	out, err := run(ctx, "docker", "inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", id)
	if err != nil {
		return 0, err
	}
	for _, kv := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(kv, "MUSTER_MUSTER_ANTI_ENTROPY_INTERVAL_MS="); ok {
			ms, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("MUSTER_MUSTER_ANTI_ENTROPY_INTERVAL_MS=%q: %w", v, err)
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	return defaultAntiEntropyInterval, nil
}

// want is what every node must show of a test instance after the heal.
type want struct {
	gone       bool
	status     string
	overridden string
	meta       map[string]string
}

func converge(ctx context.Context, b *bench, r *report) error {
	interval, err := b.antiEntropyInterval(ctx)
	if err != nil {
		return err
	}
	bound := 2 * interval
	r.step("anti-entropy interval of this cluster: %s (muster.anti-entropy-interval-ms); bound for identical registries after the heal: %s", interval, bound)

	t, err := b.openTunnel(ctx, isolated)
	if err != nil {
		return fmt.Errorf("tunnel to %s: %w", isolated, err)
	}
	defer t.close()
	c := &convergeRun{b: b, r: r, inst: map[string]*convInst{}, base: map[string]string{
		"node-a": "https://127.0.0.1:" + publishedPorts["node-a"],
		"node-b": "https://127.0.0.1:" + publishedPorts["node-b"],
		isolated: t.base,
	}}
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()

	// Before the cut: six instances of app CONVERGE-A through node-a, six
	// of CONVERGE-C through node-c, two of them OUT_OF_SERVICE.
	for i := 0; i < 6; i++ {
		if err := c.register("CONVERGE-A", fmt.Sprintf("pre-a-%d", i), "node-a"); err != nil {
			return err
		}
		if err := c.register("CONVERGE-C", fmt.Sprintf("pre-c-%d", i), isolated); err != nil {
			return err
		}
	}
	go c.heartbeats(hbCtx)
	for _, id := range []string{"pre-a-1", "pre-c-1"} {
		if err := c.override(id, "node-a"); err != nil {
			return err
		}
	}
	total := fleet + 12
	if _, err := waitUntil(ctx, 30*time.Second, 500*time.Millisecond, func() (bool, string) {
		reg, why := c.identical(ctx)
		if reg == nil {
			return false, why
		}
		return fleetOf(reg) == total, fmt.Sprintf("%d instances besides the nodes' own, want %d", fleetOf(reg), total)
	}); err != nil {
		return fmt.Errorf("the test instances did not replicate before the cut: %w", err)
	}
	r.step("12 test instances registered (pre-a-* through node-a, pre-c-* through %s, renewing every %s there), pre-a-1 and pre-c-1 OUT_OF_SERVICE; all nodes identical", isolated, renew)
	c.peerReport(ctx, "before the cut")

	reconnect, err := b.disconnect(ctx, isolated)
	if err != nil {
		return err
	}
	cut := time.Now()
	healed := false
	defer func() {
		if !healed {
			_ = reconnect()
		}
	}()
	r.step("%s disconnected from the cluster network (reached through its own loopback meanwhile)", isolated)
	time.Sleep(2 * time.Second)

	// During the cut, on both sides: each kind of write, on instances of
	// the other side and of its own, and one metadata key written on both
	// sides, the isolated node's write 6 s later (beyond a ±5 s skew).
	majority := []struct {
		what string
		do   func() error
	}{
		{"register new-a-0, new-a-1 through node-a", func() error {
			return errors.Join(c.register("CONVERGE-A", "new-a-0", "node-a"), c.register("CONVERGE-A", "new-a-1", "node-a"))
		}},
		{"OUT_OF_SERVICE on pre-c-0", func() error { return c.override("pre-c-0", "node-b") }},
		{"remove the override of pre-c-1", func() error { return c.removeOverride("pre-c-1", "node-b") }},
		{"metadata chaos=majority on pre-c-2", func() error { return c.metadata("pre-c-2", "node-b", "chaos", "majority") }},
		{"cancel pre-c-3", func() error { return c.cancel("pre-c-3", "node-b") }},
		{"metadata chaos=same-side on pre-a-4", func() error { return c.metadata("pre-a-4", "node-b", "chaos", "same-side") }},
		{"metadata conflict=majority-first on pre-a-5", func() error { return c.metadata("pre-a-5", "node-b", "conflict", "majority-first") }},
	}
	cutSide := []struct {
		what string
		do   func() error
	}{
		{"register new-c-0, new-c-1", func() error {
			return errors.Join(c.register("CONVERGE-C", "new-c-0", isolated), c.register("CONVERGE-C", "new-c-1", isolated))
		}},
		{"OUT_OF_SERVICE on pre-a-0", func() error { return c.override("pre-a-0", isolated) }},
		{"remove the override of pre-a-1", func() error { return c.removeOverride("pre-a-1", isolated) }},
		{"metadata chaos=isolated on pre-a-2", func() error { return c.metadata("pre-a-2", isolated, "chaos", "isolated") }},
		{"cancel pre-a-3", func() error { return c.cancel("pre-a-3", isolated) }},
		{"metadata chaos=same-side on pre-c-4", func() error { return c.metadata("pre-c-4", isolated, "chaos", "same-side") }},
	}
	var did []string
	for _, w := range majority {
		if err := w.do(); err != nil {
			return err
		}
		did = append(did, w.what)
	}
	r.step("through the majority (node-a, node-b): %s", strings.Join(did, "; "))
	did = nil
	for _, w := range cutSide {
		if err := w.do(); err != nil {
			return err
		}
		did = append(did, w.what)
	}
	r.step("through %s: %s", isolated, strings.Join(did, "; "))
	time.Sleep(6 * time.Second)
	if err := c.metadata("pre-a-5", isolated, "conflict", "isolated-later"); err != nil {
		return err
	}
	lastWrite := time.Now()
	r.step("through %s, 6 s later: metadata conflict=isolated-later on pre-a-5", isolated)
	expect := map[string]want{
		"pre-a-0": {status: "OUT_OF_SERVICE", overridden: "OUT_OF_SERVICE"},
		"pre-a-1": {status: "UP", overridden: "UNKNOWN"},
		"pre-a-2": {status: "UP", meta: map[string]string{"chaos": "isolated"}},
		"pre-a-3": {gone: true},
		"pre-a-4": {status: "UP", meta: map[string]string{"chaos": "same-side"}},
		"pre-a-5": {status: "UP", meta: map[string]string{"conflict": "isolated-later"}},
		"pre-c-0": {status: "OUT_OF_SERVICE", overridden: "OUT_OF_SERVICE"},
		"pre-c-1": {status: "UP", overridden: "UNKNOWN"},
		"pre-c-2": {status: "UP", meta: map[string]string{"chaos": "majority"}},
		"pre-c-3": {gone: true},
		"pre-c-4": {status: "UP", meta: map[string]string{"chaos": "same-side"}},
		"pre-c-5": {status: "UP"},
		"new-a-0": {status: "UP"}, "new-a-1": {status: "UP"},
		"new-c-0": {status: "UP"}, "new-c-1": {status: "UP"},
	}
	total = fleet + 14

	// Hold the cut until every task queued for the other side has expired
	// and each side has declared the other dead.
	var deadAfter time.Duration
	if _, err := waitUntil(ctx, taskMaxAge+time.Minute, time.Second, func() (bool, string) {
		var why []string
		for _, n := range []string{"node-a", "node-b"} {
			if s := c.peerState(ctx, n, isolated); !gone(s) {
				why = append(why, fmt.Sprintf("%s sees %s %s", n, isolated, s))
			}
			if s := c.peerState(ctx, isolated, n); !gone(s) {
				why = append(why, fmt.Sprintf("%s sees %s %s", isolated, n, s))
			}
		}
		if len(why) == 0 && deadAfter == 0 {
			deadAfter = time.Since(cut)
		}
		if age := time.Since(lastWrite); age <= taskMaxAge+2*time.Second {
			why = append(why, fmt.Sprintf("last write %s old", age.Round(time.Second)))
		}
		return len(why) == 0, strings.Join(why, "; ")
	}); err != nil {
		return fmt.Errorf("holding the cut: %w", err)
	}
	r.step("both sides declared the other dead %s after the cut; the last write is %s old (task max age %s)",
		deadAfter.Round(time.Second), time.Since(lastWrite).Round(time.Second), taskMaxAge)
	c.peerReport(ctx, "before the heal")

	if err := reconnect(); err != nil {
		return fmt.Errorf("reconnect %s: %w", isolated, err)
	}
	healed = true
	heal := time.Now()
	cutFor := heal.Sub(cut)
	r.step("%s reconnected after %s", isolated, cutFor.Round(100*time.Millisecond))

	var aliveAfter time.Duration
	var final map[string]map[string]any
	took, convErr := waitUntil(ctx, max(time.Minute, 6*interval), 250*time.Millisecond, func() (bool, string) {
		if aliveAfter == 0 && c.peerState(ctx, "node-a", isolated) == "alive" && c.peerState(ctx, isolated, "node-a") == "alive" {
			aliveAfter = time.Since(heal)
		}
		reg, why := c.identical(ctx)
		if reg == nil {
			return false, why
		}
		final = reg
		return true, ""
	})
	if convErr == nil {
		r.step("all nodes identical %s after the heal", took.Round(10*time.Millisecond))
	} else {
		r.step("nodes not identical %s after the heal: %v", took.Round(time.Second), convErr)
	}
	when := "when identical"
	if convErr != nil {
		when = "at the end of the wait"
	}
	inSyncNow := c.peerReport(ctx, when)
	inSyncAfter, inSyncErr := waitUntil(ctx, bound, 500*time.Millisecond, func() (bool, string) {
		if inSyncNow {
			return true, ""
		}
		inSyncNow = c.allInSync(ctx)
		return inSyncNow, "a peer is not in sync"
	})
	c.peerReport(ctx, "after")
	stopHB()

	r.figure("%s cut off for %s (task max age %s); both sides declared the other dead %s after the cut",
		isolated, cutFor.Round(100*time.Millisecond), taskMaxAge, deadAfter.Round(time.Second))
	if aliveAfter > 0 {
		r.figure("memberlist: node-a and %s saw each other alive again %s after the heal", isolated, aliveAfter.Round(100*time.Millisecond))
	}
	if convErr == nil {
		r.figure("anti-entropy interval %s: all nodes identical (every client-visible field of every instance) %s after the heal (bound 2 × interval = %s)",
			interval, took.Round(10*time.Millisecond), bound)
	} else {
		r.figure("anti-entropy interval %s: nodes still not identical %s after the heal (bound 2 × interval = %s)",
			interval, took.Round(time.Second), bound)
	}
	if inSyncErr == nil {
		r.figure("every peer of every node reported inSync %s after identical", inSyncAfter.Round(100*time.Millisecond))
	}
	c.statsMu.Lock()
	r.figure("test instances' heartbeats: %d ok, %d failed, %d answered 404 and registered again", c.renewOK, c.renewFailed, c.reregistered)
	c.statsMu.Unlock()

	for _, n := range nodes {
		r.figure("%s logged: %s", n, antiEntropyLog(ctx, b, n, heal))
	}
	r.check(convErr == nil && took <= bound, "all nodes identical within %s of the heal (%s; %v)", bound, took.Round(10*time.Millisecond), errString(convErr))
	r.check(inSyncErr == nil, "every node reports every peer inSync within %s of identical registries", bound)
	if final != nil {
		r.check(fleetOf(final) == total, "every node holds the %d fleet and 14 test instances besides the nodes' own (%d)", fleet, fleetOf(final))
		for _, id := range sortedKeys(expect) {
			k := convKey(id)
			r.check(expect[id].holds(final[k]), "%s: %s", id, expect[id].describe(final[k]))
		}
		return nil
	}
	// Not identical: which node lost which write.
	for _, n := range nodes {
		reg, err := c.registryOf(ctx, n)
		if err != nil {
			r.figure("%s: %v", n, err)
			continue
		}
		var lost []string
		for _, id := range sortedKeys(expect) {
			if k := convKey(id); !expect[id].holds(reg[k]) {
				lost = append(lost, id+": "+expect[id].describe(reg[k]))
			}
		}
		r.figure("%s: %d of %d test instances as the writes left them; the others: %s", n, len(expect)-len(lost), len(expect), strings.Join(lost, "; "))
	}
	return nil
}

// fleetOf counts a registry's instances but the nodes' own.
func fleetOf(reg map[string]map[string]any) int {
	n := 0
	for k := range reg {
		if !isSelf(k) {
			n++
		}
	}
	return n
}

func convKey(id string) string {
	if strings.Contains(id, "-c-") {
		return "CONVERGE-C/" + id
	}
	return "CONVERGE-A/" + id
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// allInSync says whether every node reports every peer inSync.
func (c *convergeRun) allInSync(ctx context.Context) bool {
	for _, n := range nodes {
		ps, err := c.peers(ctx, n)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.InSync == nil || !*p.InSync {
				return false
			}
		}
	}
	return true
}

func (w want) holds(inst map[string]any) bool {
	if w.gone || inst == nil {
		return w.gone == (inst == nil)
	}
	if inst["status"] != w.status {
		return false
	}
	if w.overridden != "" && inst["overriddenStatus"] != w.overridden && inst["overriddenstatus"] != w.overridden {
		return false
	}
	meta, _ := inst["metadata"].(map[string]any)
	for k, v := range w.meta {
		if meta[k] != v {
			return false
		}
	}
	return true
}

func (w want) describe(inst map[string]any) string {
	want := "cancelled everywhere"
	if !w.gone {
		want = "status " + w.status
		if w.overridden != "" {
			want += ", overriddenStatus " + w.overridden
		}
		for k, v := range w.meta {
			want += fmt.Sprintf(", metadata %s=%s", k, v)
		}
	}
	got := "absent"
	if inst != nil {
		got = fmt.Sprintf("status %v, overriddenStatus %v, metadata %v", inst["status"], inst["overriddenStatus"], inst["metadata"])
	}
	return "want " + want + ", got " + got
}

// antiEntropyLog sums up what a node logged about anti-entropy since the
// heal: what an operator sees of the repairs.
func antiEntropyLog(ctx context.Context, b *bench, node string, since time.Time) string {
	logs, err := b.logs(ctx, node)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.Contains(line, "anti-entropy") {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["time"])); err == nil && at.Before(since.Add(-time.Second)) {
			continue
		}
		delete(rec, "time")
		out, _ := json.Marshal(rec)
		lines = append(lines, string(out))
	}
	if len(lines) == 0 {
		return "nothing about anti-entropy"
	}
	return strings.Join(lines, " | ")
}
