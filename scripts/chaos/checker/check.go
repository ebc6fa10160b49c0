package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

type checkResult struct {
	name    string
	pass    bool
	figures string
	details []string
	insts   map[string]bool // instances named by a violation
}

type results struct {
	r      *run
	checks []*checkResult
}

func (rs *results) ok() bool {
	for _, c := range rs.checks {
		if !c.pass {
			return false
		}
	}
	return true
}

func (rs *results) summary(seed int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d:", seed)
	for _, c := range rs.checks {
		v := "PASS"
		if !c.pass {
			v = "FAIL"
		}
		fmt.Fprintf(&b, " %s=%s", c.name, v)
	}
	for _, c := range rs.checks {
		if c.name == "lost" || c.name == "resurrect" || c.name == "self-preservation" {
			fmt.Fprintf(&b, "; %s", c.figures)
		}
		if c.name == "convergence" {
			fmt.Fprintf(&b, "\n    %s", c.figures)
		}
	}
	return b.String()
}

func newCheck(name string) *checkResult {
	return &checkResult{name: name, pass: true, insts: map[string]bool{}}
}

func (c *checkResult) violate(key, format string, a ...any) {
	c.pass = false
	if key != "" {
		c.insts[key] = true
	}
	if len(c.details) < 30 {
		c.details = append(c.details, fmt.Sprintf(format, a...))
	} else if len(c.details) == 30 {
		c.details = append(c.details, "… more")
	}
}

// readsOf returns node n's successful reads in invoke order.
func (r *run) readsOf(n int) []*Read {
	var out []*Read
	for _, rd := range r.h.reads {
		if rd.Node == n {
			out = append(out, rd)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Invoke < out[b].Invoke })
	return out
}

// ackEff is when an operation may have taken effect at the latest: its
// ack when it was answered; for an unknown outcome, a second after the
// error, or after the node's SIGCONT if it was paused meanwhile (a paused
// node handles what was sent to it when it resumes).
func (r *run) ackEff(o *Op) time.Duration {
	// Writes that never saw each other are ordered by their nodes'
	// clocks (docs/how-it-works.md): while a node's clock is off, and
	// until that much time has passed, a write is concurrent with any
	// other made within the offset of it.
	slack := time.Duration(0)
	for _, f := range r.faults {
		off := max(f.Offset, -f.Offset)
		if f.Kind == "clock" && o.Ack >= f.Start && o.Invoke <= f.End+off {
			slack = max(slack, off)
		}
	}
	if o.Out != Info {
		return o.Ack + slack
	}
	for _, f := range r.faults {
		if f.Kind == "pause" && f.A == o.Node && o.Invoke < f.End && o.Ack >= f.Start {
			return f.End + 2*time.Second + slack
		}
	}
	return o.Ack + time.Second + slack
}

// candidates are the writes (not failed) that no acknowledged write
// follows: the last acknowledged one and every write concurrent with it
// or later. Any of their values may be the final one.
func (r *run) candidates(ws []*Op) []*Op {
	var out []*Op
	for _, x := range ws {
		if x.Out == Fail {
			continue
		}
		superseded := false
		for _, y := range ws {
			if y.Out == OK && y.Invoke > r.ackEff(x) {
				superseded = true
				break
			}
		}
		if !superseded {
			out = append(out, x)
		}
	}
	return out
}

func (r *run) check(quiet time.Duration, watchFinal map[int]string) *results {
	rs := &results{r: r}
	byKey := map[string][]*Op{}
	for _, o := range r.h.ops {
		byKey[o.key()] = append(byKey[o.key()], o)
	}
	reads := map[int][]*Read{}
	for n := 1; n <= 4; n++ {
		reads[n] = r.readsOf(n)
	}

	// 1 and 3, after every heal (the writer paused) and at the end.
	c1 := newCheck("lost")
	c3 := newCheck("final-state")
	lost := 0
	for _, ep := range r.epochs {
		lost += r.checkEpoch(ep, byKey, c1, c3)
	}
	c1.figures = fmt.Sprintf("instances lost: %d (over %d heals)", lost, len(r.epochs))
	c3.figures = fmt.Sprintf("%d heals checked", len(r.epochs))
	rs.checks = append(rs.checks, c1)

	// 2. No acknowledged cancel resurrected.
	c2 := newCheck("resurrect")
	resurrected := 0 // cancels, however many nodes brought each back
	counted := map[*Op]bool{}
	for key, ops := range byKey {
		for _, cn := range ops {
			if cn.Kind != "cancel" || cn.Out != OK {
				continue
			}
			for n := 1; n <= 4; n++ {
				seenAbsent := false
				for _, rd := range reads[n] {
					if rd.Invoke < cn.Ack {
						continue
					}
					_, present := rd.Insts[key]
					if !present {
						seenAbsent = true
						continue
					}
					if !seenAbsent {
						continue
					}
					allowed := false
					for _, o := range ops {
						if o.Kind == "register" && o.Out != Fail && o.Invoke < rd.Ack && r.ackEff(o) >= cn.Invoke {
							allowed = true
							break
						}
					}
					if !allowed {
						if !counted[cn] {
							counted[cn] = true
							resurrected++
						}
						c2.violate(key, "%s: cancel acked by n%d at %.3fs; n%d served it absent, then present again at %.3fs (%s) with no register invoked since",
							key, cn.Node, cn.Ack.Seconds(), n, rd.Invoke.Seconds(), rd.Insts[key])
					}
					break
				}
			}
		}
	}
	c2.figures = fmt.Sprintf("cancels resurrected: %d", resurrected)
	rs.checks = append(rs.checks, c2)

	rs.checks = append(rs.checks, c3)

	// 4. Convergence after each heal, and staleness.
	c4 := newCheck("convergence")
	var convs []float64
	var final time.Duration = -1
	for _, ep := range r.epochs {
		if ep.conv < 0 {
			c4.violate("", "%s: the nodes were not identical within the wait (healed at %.1fs)", ep.label, ep.heal.Seconds())
			continue
		}
		if ep.label == "final" {
			final = ep.conv
		} else {
			convs = append(convs, ep.conv.Seconds())
		}
	}
	calm, faulted := r.staleness(byKey, reads)
	c4.figures = fmt.Sprintf("convergence after heal (s, writer paused): %s; final: %s; staleness (s, ack → every node that hears the write's node serves it): no fault %s; during faults %s",
		quantiles(convs), durOr(final), quantiles(calm), quantiles(faulted))
	rs.checks = append(rs.checks, c4)

	// 5. Self-preservation: a cut-off node evicts nothing it cannot hear.
	c5 := newCheck("self-preservation")
	vanished := 0
	for _, f := range r.faults {
		for n := range f.Minority {
			var base *Read
			for _, rd := range reads[n] {
				if rd.Invoke < f.Start {
					base = rd
				}
			}
			if base == nil {
				continue
			}
			for key := range base.Insts {
				// Alive: its client's last life began before the fault
				// (a registration that may have taken effect, after the
				// client's last cancel) and nobody cancelled it since.
				alive := true
				var last *Op
				for _, o := range byKey[key] {
					if o.Invoke >= f.Start {
						continue
					}
					if (o.Kind == "register" && o.Out != Fail) || (o.Kind == "cancel" && o.By == "writer") {
						if last == nil || o.Invoke > last.Invoke {
							last = o
						}
					}
					if o.Kind == "cancel" && o.Invoke >= base.Invoke-time.Second {
						alive = false
					}
				}
				if last == nil || last.Kind != "register" {
					alive = false
				}
				for _, o := range byKey[key] {
					if o.Kind == "cancel" && o.Invoke >= f.Start && o.Invoke <= f.End {
						alive = false
					}
				}
				if !alive {
					continue
				}
				for _, rd := range reads[n] {
					if rd.Invoke < f.Start || rd.Invoke > f.End {
						continue
					}
					if _, ok := rd.Insts[key]; !ok {
						vanished++
						c5.violate(key, "%s: present on n%d before the %s at %.1fs, renewing, gone from n%d at %.1fs during it", key, n, f.Kind, f.Start.Seconds(), n, rd.Invoke.Seconds())
						break
					}
				}
			}
		}
	}
	c5.figures = fmt.Sprintf("instances evicted by a cut-off node while alive: %d", vanished)
	rs.checks = append(rs.checks, c5)

	// 6. The watch stream.
	c6 := newCheck("watch")
	var figs []string
	for _, w := range r.watchers {
		w.mu.Lock()
		figs = append(figs, fmt.Sprintf("n%d: %d events, %d reconnects, %d resyncs", w.n, w.events, w.reconnects, w.resyncs))
		for _, v := range w.violations {
			c6.violate("", "%s", v)
		}
		w.mu.Unlock()
		if msg := watchFinal[w.n]; msg != "" {
			c6.violate("", "n%d: the stream's state differs from GET apps/%s after the heal: %s", w.n, watchApp, msg)
		}
	}
	c6.figures = strings.Join(figs, "; ")
	rs.checks = append(rs.checks, c6)

	r.report(rs, byKey, reads)
	return rs
}

func showView(v View, present bool) string {
	if !present {
		return "absent"
	}
	return v.String()
}

func setList(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func durOr(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func quantiles(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return fmt.Sprintf("p50 %.2f p99 %.2f max %.2f (n=%d)", q(0.5), q(0.99), s[len(s)-1], len(s))
}

// hears says whether node to could learn of node from's writes at t:
// both up and no partition between them in that direction.
func (r *run) hears(from, to int, t time.Duration) bool {
	for _, f := range r.faults {
		if t < f.Start || t > f.End {
			continue
		}
		switch f.Kind {
		case "cut", "split":
			if (from == f.A) != (to == f.A) {
				return false
			}
		case "oneway", "ring":
			// One-way too: replication is HTTP over TCP, which needs
			// both directions (only gossip's UDP gets through one way).
			if (from == f.A && to == f.B) || (from == f.B && to == f.A) {
				return false
			}
		case "pause", "kill-data", "kill-nodata":
			if from == f.A || to == f.A {
				return false
			}
		}
	}
	return true
}

// staleness is, for every acknowledged write, the time from its ack until
// every node among n1..n3 that hears the write's node (from the ack until
// it served the write) served it: calm (no fault from the invoke until
// every node served it) and during faults. Writes that a later write to
// the same instance overtook before every such node served them are left
// out.
func (r *run) staleness(byKey map[string][]*Op, reads map[int][]*Read) (calm, faulted []float64) {
	inFault := func(a, b time.Duration) bool {
		for _, f := range r.faults {
			if a <= f.End+r.opt.settle/2 && b >= f.Start {
				return true
			}
		}
		return false
	}
	for key, ops := range byKey {
		for _, w := range ops {
			if w.Out != OK || w.Kind == "heartbeat" {
				continue
			}
			var match func(v View, ok bool) bool
			switch w.Kind {
			case "register", "metadata":
				match = func(v View, ok bool) bool { return ok && v.Meta == w.Value }
			case "override":
				match = func(v View, ok bool) bool { return ok && v.Overridden == "OUT_OF_SERVICE" }
			case "unoverride":
				match = func(v View, ok bool) bool { return ok && v.Overridden == "UNKNOWN" }
			case "cancel":
				match = func(v View, ok bool) bool { return !ok }
			default:
				continue
			}
			// The next write to the instance ends the window.
			next := time.Duration(math.MaxInt64)
			for _, o := range ops {
				if o.Kind != "heartbeat" && o.Invoke > w.Invoke {
					next = min(next, o.Invoke)
				}
			}
			worst := time.Duration(0)
			ok, targets := true, 0
			for n := 1; n <= 3 && ok; n++ {
				if w.Node <= 3 && !r.hears(w.Node, n, w.Ack) {
					continue
				}
				seen := false
				for _, rd := range reads[n] {
					if rd.Invoke < w.Ack {
						continue
					}
					if rd.Ack > next || (w.Node <= 3 && !r.hears(w.Node, n, rd.Invoke)) {
						break
					}
					v, present := rd.Insts[key]
					if match(v, present) {
						worst = max(worst, rd.Ack-w.Ack)
						seen = true
						break
					}
				}
				ok = seen
				targets++
			}
			if !ok || targets == 0 {
				continue
			}
			if inFault(w.Invoke, w.Ack+worst) {
				faulted = append(faulted, worst.Seconds())
			} else {
				calm = append(calm, worst.Seconds())
			}
		}
	}
	return calm, faulted
}

// watchFinal waits until each watcher's state equals its node's GET
// apps/CHKW; it returns what still differs per node.
func (r *run) watchFinal(timeout time.Duration) map[int]string {
	out := map[int]string{}
	deadline := time.Now().Add(timeout)
	for _, w := range r.watchers {
		for {
			st, _, err := w.snapshot(context.Background())
			diff := ""
			if err != nil {
				diff = "snapshot: " + err.Error()
			} else {
				w.mu.Lock()
				diff = diffViews(w.state, st)
				w.mu.Unlock()
			}
			if diff == "" || time.Now().After(deadline) {
				out[w.n] = diff
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return out
}

func diffViews(stream, node map[string]View) string {
	var ds []string
	for k, v := range node {
		if s, ok := stream[k]; !ok || s != v {
			ds = append(ds, fmt.Sprintf("%s stream %s node %s", k, showView(s, ok), v))
		}
	}
	for k, s := range stream {
		if _, ok := node[k]; !ok {
			ds = append(ds, fmt.Sprintf("%s stream %s node absent", k, s))
		}
	}
	sort.Strings(ds)
	return strings.Join(ds, "; ")
}

// report prints the checks, the figures and the history of every instance
// a violation names.
func (r *run) report(rs *results, byKey map[string][]*Op, reads map[int][]*Read) {
	fmt.Printf("\nseed %d: %d operations, %d reads\n", r.seed, len(r.h.ops), len(r.h.reads))
	named := map[string]bool{}
	for _, c := range rs.checks {
		v := "PASS"
		if !c.pass {
			v = "FAIL"
		}
		fmt.Printf("%s %-18s %s\n", v, c.name, c.figures)
		for _, d := range c.details {
			fmt.Println("     ", d)
		}
		for k := range c.insts {
			named[k] = true
		}
	}
	keys := setList(named)
	if len(keys) > 0 {
		fmt.Println("\nfaults:")
		for _, e := range r.h.events {
			fmt.Printf("  %8.3fs %s: %s\n", e.At.Seconds(), e.Kind, e.What)
		}
	}
	for _, k := range keys {
		fmt.Printf("\nhistory of %s (heartbeats that were ok left out):\n", k)
		hb := 0
		for _, o := range r.h.opsOf(k) {
			if o.Kind == "heartbeat" && o.Out == OK {
				hb++
				continue
			}
			fmt.Println("  op  ", o)
		}
		fmt.Printf("  (%d ok heartbeats)\n", hb)
		for n := 1; n <= 4; n++ {
			last := "-"
			for _, rd := range reads[n] {
				v, ok := rd.Insts[k]
				s := showView(v, ok)
				if s != last {
					fmt.Printf("  read %8.3fs n%d serves %s\n", rd.Invoke.Seconds(), n, s)
					last = s
				}
			}
		}
	}
}

// checkEpoch checks one epoch: every renewing instance with an
// acknowledged registration is on every node (1), and every node serves
// the same, equal to the last acknowledged write of each piece (3). It
// returns the instances lost.
func (r *run) checkEpoch(ep *epoch, byKey map[string][]*Op, c1, c3 *checkResult) int {
	lost := 0
	final := ep.reads
	for n := 1; n <= 3; n++ {
		if final[n] == nil {
			c3.violate("", "%s: n%d gave no read", ep.label, n)
		}
	}
	for n := 2; n <= 3; n++ {
		if final[1] == nil || final[n] == nil {
			continue
		}
		keys := map[string]bool{}
		for k := range final[1] {
			keys[k] = true
		}
		for k := range final[n] {
			keys[k] = true
		}
		for k := range keys {
			a, okA := final[1][k]
			b, okB := final[n][k]
			if okA != okB || a != b {
				c3.violate(k, "%s: %s: n1 serves %s, n%d serves %s", ep.label, k, showView(a, okA), n, showView(b, okB))
			}
		}
	}
	for _, i := range r.insts {
		key := i.key()
		var ops []*Op
		for _, o := range byKey[key] {
			if o.Invoke < ep.at {
				ops = append(ops, o)
			}
		}
		registered := ep.registered[key]
		cancelledAt := ep.cancelledAt[key]
		if registered {
			// Present is owed when the last acknowledged existence write
			// (and everything concurrent with it) is a registration: an
			// operator's cancel just before the pause leaves the client to
			// register again on its next heartbeat.
			var exist []*Op
			for _, o := range ops {
				if o.Kind == "register" || o.Kind == "cancel" {
					exist = append(exist, o)
				}
			}
			acked := false
			for _, o := range exist {
				if o.Kind == "register" && o.Out == OK {
					acked = true
				}
			}
			for _, o := range r.candidates(exist) {
				if o.Kind == "cancel" {
					acked = false
				}
			}
			for n := 1; n <= 3 && acked; n++ {
				if final[n] == nil {
					continue
				}
				if _, ok := final[n][key]; !ok {
					lost++
					c1.violate(key, "%s: %s: renewing, registration acknowledged, absent on n%d", ep.label, key, n)
				}
			}
		}
		eitherPresence := false
		if !registered {
			// The client stopped renewing at its cancel; an unacknowledged
			// cancel leaves the copy to expire: a lease (6 s) and an
			// eviction, which self-preservation or a peer out of reach
			// (evictions held) may put off for as long as they last.
			ackedCancel := false
			for _, o := range ops {
				if o.Kind == "cancel" && o.Invoke >= cancelledAt && o.Out == OK {
					ackedCancel = true
				}
			}
			if !ackedCancel {
				eitherPresence = true
			}
			// A registration of unknown outcome may land after the cancel
			// (a paused node handles it when it resumes); the copy then
			// lives until it expires and is evicted.
			for _, o := range ops {
				if o.Kind == "register" && o.Out == Info && r.ackEff(o) >= cancelledAt {
					eitherPresence = true
				}
			}
		}
		var metaW, ovW []*Op
		for _, o := range ops {
			switch o.Kind {
			case "register", "metadata":
				metaW = append(metaW, o)
			case "override", "unoverride", "cancel":
				if o.Kind == "cancel" && o.By == "writer" && o.Out == Fail {
					// The client stopped renewing anyway: its copies may
					// expire, and an eviction drops the override too.
					c := *o
					c.Out, c.Ack = Info, o.Invoke+7*time.Second
					o = &c
				}
				ovW = append(ovW, o)
			}
		}
		wantMeta := map[string]bool{}
		for _, o := range r.candidates(metaW) {
			wantMeta[o.Value] = true
		}
		wantOv := map[string]bool{}
		cands := r.candidates(ovW)
		for _, o := range cands {
			if o.Kind == "override" {
				wantOv["OUT_OF_SERVICE"] = true
			} else {
				wantOv["UNKNOWN"] = true
			}
		}
		if len(cands) == 0 {
			wantOv["UNKNOWN"] = true
		}
		for n := 1; n <= 3; n++ {
			if final[n] == nil {
				continue
			}
			v, present := final[n][key]
			if !eitherPresence && present != registered {
				if registered {
					continue // check 1's
				}
				c3.violate(key, "%s: %s: n%d serves %s, but its client cancelled (acknowledged)", ep.label, key, n, showView(v, present))
				continue
			}
			if !present {
				continue
			}
			if len(wantMeta) > 0 && !wantMeta[v.Meta] {
				c3.violate(key, "%s: %s: n%d serves metadata k=%s, the last acknowledged write of it says k∈%v", ep.label, key, n, v.Meta, setList(wantMeta))
			}
			if !wantOv[v.Overridden] {
				c3.violate(key, "%s: %s: n%d serves overriddenStatus %s, the last acknowledged override write says %v", ep.label, key, n, v.Overridden, setList(wantOv))
			}
			wantStatus := "UP"
			if v.Overridden == "OUT_OF_SERVICE" {
				wantStatus = "OUT_OF_SERVICE"
			}
			if v.Status != wantStatus {
				c3.violate(key, "%s: %s: n%d serves status %s with overriddenStatus %s (want %s)", ep.label, key, n, v.Status, v.Overridden, wantStatus)
			}
		}
	}
	return lost
}
