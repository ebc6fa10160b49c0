package healthcheck

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
)

// The round's decisions as tables of inputs and expected verdicts, in the
// shape of consul's agent/checks tests; the rounds themselves (probes,
// writes, the cluster) are target_test.go's and cluster_test.go's.

func TestFateOf(t *testing.T) {
	cases := []struct {
		name         string
		mode         Mode
		status       registry.Status
		marked       bool
		owned        bool
		want         fate
		wantEligible bool
	}{
		{"owned UP instance is probed", ModeHTTP, registry.StatusUp, false, true, fateProbe, true},
		{"owned TCP instance is probed", ModeTCP, registry.StatusUp, false, true, fateProbe, true},
		{"owned marked instance is probed to lift its mark", ModeHTTP, registry.StatusUp, true, true, fateProbe, true},
		{"marked instance is probed whatever its client says", ModeHTTP, registry.StatusDown, true, true, fateProbe, true},
		{"owned instance its client says is DOWN is left alone", ModeHTTP, registry.StatusDown, false, true, fateNone, false},
		{"owned STARTING instance is left alone", ModeTCP, registry.StatusStarting, false, true, fateNone, false},
		{"owned instance with checks off is left alone", ModeOff, registry.StatusUp, false, true, fateNone, false},
		{"checks turned off lift an owned mark", ModeOff, registry.StatusUp, true, true, fateLift, false},
		{"another node's instance is not probed here", ModeHTTP, registry.StatusUp, false, false, fateNone, true},
		{"another node's mark counts for the guard", ModeHTTP, registry.StatusUp, true, false, fateOthers, true},
		{"another node's mark with checks off does not count", ModeOff, registry.StatusUp, true, false, fateNone, false},
		{"another node's DOWN instance is nothing", ModeHTTP, registry.StatusDown, false, false, fateNone, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, eligible := fateOf(tc.mode, tc.status, tc.marked, tc.owned)
			if got != tc.want || eligible != tc.wantEligible {
				t.Fatalf("fateOf(%s, %s, marked %v, owned %v) = %d, eligible %v; want %d, eligible %v",
					tc.mode, tc.status, tc.marked, tc.owned, got, eligible, tc.want, tc.wantEligible)
			}
		})
	}
}

func TestGuardedApps(t *testing.T) {
	cases := []struct {
		name         string
		failing      map[string]int
		eligible     map[string]int
		markedOthers map[string]int
		maxDown      int
		want         []string
	}{
		{"nothing fails", nil, map[string]int{"A": 10}, nil, 50, nil},
		{"a few fail", map[string]int{"A": 2}, map[string]int{"A": 10}, nil, 50, nil},
		{"exactly the limit is allowed", map[string]int{"A": 5}, map[string]int{"A": 10}, nil, 50, nil},
		{"one past the limit guards", map[string]int{"A": 6}, map[string]int{"A": 10}, nil, 50, []string{"A"}},
		{"the whole app fails", map[string]int{"A": 3}, map[string]int{"A": 3}, nil, 50, []string{"A"}},
		{"other nodes' marks count", map[string]int{"A": 3}, map[string]int{"A": 10}, map[string]int{"A": 3}, 50, []string{"A"}},
		{"other nodes' marks alone guard nothing", nil, map[string]int{"A": 10}, map[string]int{"A": 9}, 50, nil},
		{"per app", map[string]int{"A": 1, "B": 4}, map[string]int{"A": 10, "B": 4}, nil, 50, []string{"B"}},
		{"100 % never guards", map[string]int{"A": 4}, map[string]int{"A": 4}, nil, 100, nil},
		{"0 % guards any failure", map[string]int{"A": 1}, map[string]int{"A": 100}, nil, 0, []string{"A"}},
		{"no eligible instance guards nothing", map[string]int{"A": 1}, map[string]int{}, nil, 50, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := guardedApps(tc.failing, tc.eligible, tc.markedOthers, tc.maxDown)
			want := map[string]bool{}
			for _, a := range tc.want {
				want[a] = true
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("guardedApps = %v, want %v", got, want)
			}
		})
	}
}

func TestStreak_next(t *testing.T) {
	// Config's defaults: 3 failures mark, 2 successes lift.
	const failuresBeforeDown, successesBeforeUp = 3, 2
	type step struct {
		ok      bool
		guarded bool
		want    streak
		restart bool
	}
	pass := func(want streak, restart bool) step { return step{true, false, want, restart} }
	fail := func(want streak, restart bool) step { return step{false, false, want, restart} }
	failGuarded := func(want streak, restart bool) step { return step{false, true, want, restart} }
	cases := []struct {
		name  string
		from  streak
		steps []step
	}{
		{"healthy stays up", streak{}, []step{
			pass(streak{successes: 1}, true),
			pass(streak{successes: 2}, false),
			pass(streak{successes: 3}, false),
		}},
		{"three failures mark down", streak{successes: 5}, []step{
			fail(streak{failures: 1}, true),
			fail(streak{failures: 2}, false),
			fail(streak{failures: 3, down: true}, true),
			fail(streak{failures: 4, down: true}, false),
		}},
		{"a success in between starts over", streak{}, []step{
			fail(streak{failures: 1}, true),
			fail(streak{failures: 2}, false),
			pass(streak{successes: 1}, true),
			fail(streak{failures: 1}, true),
		}},
		{"two successes lift the mark", streak{failures: 4, down: true}, []step{
			pass(streak{successes: 1, down: true}, true),
			pass(streak{successes: 2}, true),
			pass(streak{successes: 3}, false),
		}},
		{"a failure while down keeps the mark and its start", streak{successes: 1, down: true}, []step{
			fail(streak{failures: 1, down: true}, false),
			pass(streak{successes: 1, down: true}, true),
			pass(streak{successes: 2}, true),
		}},
		{"the guard holds the mark back", streak{}, []step{
			failGuarded(streak{failures: 1}, true),
			failGuarded(streak{failures: 2}, false),
			failGuarded(streak{failures: 3}, false),
			failGuarded(streak{failures: 4}, false),
			fail(streak{failures: 5, down: true}, true),
		}},
		{"the guard does not lift a mark", streak{failures: 3, down: true}, []step{
			failGuarded(streak{failures: 4, down: true}, false),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.from
			for i, st := range tc.steps {
				got, restart := s.next(st.ok, st.guarded, failuresBeforeDown, successesBeforeUp)
				if got != st.want || restart != st.restart {
					t.Fatalf("step %d (ok %v, guarded %v) from %+v: %+v, restart %v; want %+v, restart %v",
						i, st.ok, st.guarded, s, got, restart, st.want, st.restart)
				}
				s = got
			}
		})
	}
}

func TestCarryOver(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	markedAt := now.Add(-time.Hour)
	t1 := target{mode: ModeTCP, addr: netip.MustParseAddrPort("10.0.0.1:8080")}
	t2 := target{mode: ModeTCP, addr: netip.MustParseAddrPort("10.0.0.2:8080")}
	prev := &state{target: t1, streak: streak{failures: 2}, since: now.Add(-time.Minute), lastResult: "refused"}
	mark := &registry.HealthMark{Reason: "503", Since: markedAt.UnixMilli(), By: "node-b"}
	cases := []struct {
		name string
		prev *state
		t    target
		mark *registry.HealthMark
		want state
	}{
		{"same target keeps the streak", prev, t1, nil, *prev},
		{"same target keeps it over the registry's mark", prev, t1, mark, *prev},
		{"a new instance starts afresh", nil, t1, nil, state{target: t1, since: now}},
		{"a moved target starts afresh", prev, t2, nil, state{target: t2, since: now}},
		{"a takeover keeps the mark in force", nil, t1, mark,
			state{target: t1, streak: streak{down: true}, reason: "503", since: markedAt}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before state
			if tc.prev != nil {
				before = *tc.prev
			}
			got := carryOver(tc.prev, tc.t, tc.mark, now)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("carryOver = %+v, want %+v", got, tc.want)
			}
			if tc.prev != nil && !reflect.DeepEqual(*tc.prev, before) {
				t.Fatal("carryOver changed the previous state, which Report still reads")
			}
		})
	}
}

// A probe's context: its own deadline (the poller enforces it, no timer),
// its parent's cancellation and values; a cancelled parent ends it.
func TestProbeCtx(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	d := time.Now().Add(time.Hour)
	pc := &probeCtx{Context: parent, deadline: d}
	if got, ok := pc.Deadline(); !ok || !got.Equal(d) {
		t.Fatalf("Deadline = %v, %v; want %v", got, ok, d)
	}
	if pc.Done() == nil || pc.Err() != nil || pc.Value(key{}) != "v" {
		t.Fatalf("Done %v, Err %v, Value %v: want the parent's", pc.Done(), pc.Err(), pc.Value(key{}))
	}
	cancel()
	select {
	case <-pc.Done():
	default:
		t.Fatal("a cancelled parent leaves the probe's context open")
	}
	if !errors.Is(pc.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want Canceled", pc.Err())
	}
	// A dial under a cancelled context does not connect.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := newProber(time.Second)
	if ok, res := p.probeBy(pc, target{mode: ModeTCP, addr: netip.MustParseAddrPort(ln.Addr().String())}); ok {
		t.Fatalf("probe under a cancelled context: %v %q", ok, res)
	}
}
