package main

import (
	"fmt"
	"math/rand"
	"os"
	"syscall"
	"time"
)

// Fault is one entry of the seeded schedule.
type Fault struct {
	Kind  string
	A, B  int // nodes (B: the other end where one matters)
	Dur   time.Duration
	Start time.Duration // when applied (history time)
	End   time.Duration // when healed
	// Minority is the side that a partition cuts off (nil: no partition).
	Minority map[int]bool
	// Offset is, for a clock fault, how far node A's registry clock is
	// moved (ahead or behind).
	Offset time.Duration
}

func (f *Fault) String() string {
	switch f.Kind {
	case "cut":
		return fmt.Sprintf("cut: n%d cut off from the others both ways for %v", f.A, f.Dur)
	case "split":
		return fmt.Sprintf("split brain: n%d | the rest, writes alternate sides, for %v", f.A, f.Dur)
	case "oneway":
		return fmt.Sprintf("one-way: n%d's packets to n%d dropped (n%d still hears n%d), writes alternate sides, for %v", f.A, f.B, f.A, f.B, f.Dur)
	case "ring":
		return fmt.Sprintf("ring: n%d–n%d cut, both still reach n%d, writes alternate sides, for %v", f.A, f.B, 6-f.A-f.B, f.Dur)
	case "kill-data":
		return fmt.Sprintf("kill -9 n%d (data dir kept), down %v", f.A, f.Dur)
	case "kill-nodata":
		return fmt.Sprintf("kill -9 n%d and wipe its data dir, down %v", f.A, f.Dur)
	case "pause":
		return fmt.Sprintf("SIGSTOP n%d for %v", f.A, f.Dur)
	case "add-remove":
		return fmt.Sprintf("add n4, remove it (SIGTERM) after %v", f.Dur)
	case "clock":
		return fmt.Sprintf("n%d restarted with its clock %v off (muster.testing.clock-offset-ms), for %v", f.A, f.Offset, f.Dur)
	}
	return f.Kind
}

// faultKinds is what the schedule draws from. A node's clock ahead or
// behind is Muster's injected offset (muster.testing.clock-offset-ms: the
// static binary reads the vDSO clock, which LD_PRELOAD tricks do not
// reach), set by restarting the node with it and healed by restarting it
// without.
var faultKinds = []string{"cut", "split", "oneway", "ring", "kill-data", "kill-nodata", "pause", "add-remove", "clock"}

// schedule draws k faults: every kind once (shuffled) before any repeats.
func schedule(rng *rand.Rand, k int) []*Fault {
	var out []*Fault
	var bag []string
	for len(out) < k {
		if len(bag) == 0 {
			bag = append([]string(nil), faultKinds...)
			rng.Shuffle(len(bag), func(a, b int) { bag[a], bag[b] = bag[b], bag[a] })
		}
		kind := bag[0]
		bag = bag[1:]
		f := &Fault{Kind: kind, A: 1 + rng.Intn(3)}
		f.B = 1 + (f.A+rng.Intn(2))%3 // another node
		sec := func(lo, hi int) time.Duration { return time.Duration(lo+rng.Intn(hi-lo+1)) * time.Second }
		switch kind {
		case "cut", "split", "oneway", "ring":
			// Now and then longer than the tombstones live (lease + 30 s).
			if rng.Intn(2) == 0 {
				f.Dur = sec(37, 42)
			} else {
				f.Dur = sec(6, 20)
			}
		case "kill-data", "kill-nodata":
			f.Dur = sec(4, 15)
		case "pause":
			f.Dur = sec(3, 15)
		case "add-remove":
			f.Dur = sec(12, 25)
		case "clock":
			// Minutes, within muster.max-clock-skew-ms (5 min), ahead or
			// behind.
			f.Offset = sec(60, 180)
			if rng.Intn(2) == 0 {
				f.Offset = -f.Offset
			}
			f.Dur = sec(15, 30)
		}
		out = append(out, f)
	}
	return out
}

func (r *run) applyFault(f *Fault) error {
	r.h.event("fault", f, f.String())
	f.Start = r.h.now()
	others := func(a int) []int {
		var o []int
		for j := 1; j <= 3; j++ {
			if j != a {
				o = append(o, j)
			}
		}
		return o
	}
	switch f.Kind {
	case "cut", "split":
		for _, o := range others(f.A) {
			if err := r.net.cut(f.A, o); err != nil {
				return err
			}
		}
		f.Minority = map[int]bool{f.A: true}
	case "oneway":
		if err := r.net.block(f.A, f.B); err != nil {
			return err
		}
		// Replication (HTTP over TCP) fails both ways: both ends are cut
		// off from each other's clients.
		f.Minority = map[int]bool{f.A: true, f.B: true}
	case "ring":
		if err := r.net.cut(f.A, f.B); err != nil {
			return err
		}
		f.Minority = map[int]bool{f.A: true, f.B: true}
	case "kill-data", "kill-nodata":
		r.nodes[f.A].stop(false, 0)
		if f.Kind == "kill-nodata" {
			if err := os.RemoveAll(r.nodes[f.A].dataDir()); err != nil {
				return err
			}
		}
	case "pause":
		return r.nodes[f.A].signal(syscall.SIGSTOP)
	case "add-remove":
		return r.nodes[4].start()
	case "clock":
		return r.restartWithOffset(f.A, f.Offset)
	}
	if f.Minority != nil && f.Kind != "cut" {
		// Split brain, one-way, ring: each instance's next write goes to
		// the other side from its last one, so both sides write every
		// instance (a cut keeps writing through random nodes).
		sides := map[int]bool{}
		for n := 1; n <= 3; n++ {
			sides[n] = f.Minority[n]
		}
		if f.Kind == "ring" || f.Kind == "oneway" {
			// The two ends alternate (the third node hears both).
			sides = map[int]bool{f.A: true, f.B: false, 6 - f.A - f.B: false}
		}
		r.setSplit(sides)
	}
	return nil
}

func (r *run) healFault(f *Fault) error {
	var err error
	switch f.Kind {
	case "cut", "split", "oneway", "ring":
		r.setSplit(nil)
		err = r.net.healAll()
	case "kill-data", "kill-nodata":
		err = r.nodes[f.A].start()
	case "pause":
		err = r.nodes[f.A].signal(syscall.SIGCONT)
	case "add-remove":
		r.nodes[4].stop(true, 15*time.Second)
	case "clock":
		err = r.restartWithOffset(f.A, 0)
	}
	f.End = r.h.now()
	r.h.event("heal", f, "healed: "+f.Kind)
	return err
}

// restartWithOffset stops node a gracefully and starts it again with its
// registry clock offset by off.
func (r *run) restartWithOffset(a int, off time.Duration) error {
	n := r.nodes[a]
	n.stop(true, 10*time.Second)
	n.offset = off
	if err := n.start(); err != nil {
		return err
	}
	return n.waitServing(30 * time.Second)
}
