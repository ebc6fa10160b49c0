package replication

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

var t0 = registrytest.Epoch

// tk is a task for instance ORDERS/id created at t0+at, without an
// instance (so register and heartbeat expire after the default 30 s).
func tk(a registry.Action, id string, at time.Duration) Task {
	return Task{Action: a, Key: registry.InstanceKey{App: "ORDERS", ID: id}, CreatedAt: t0.Add(at)}
}

// withRenewal gives t an instance with the given renewal interval.
func withRenewal(t Task, secs int) Task {
	t.Instance = registrytest.NewInstance(t.Key.App, t.Key.ID, registrytest.WithRenewalInterval(secs))
	return t
}

// many returns n heartbeats for instances i000, i001, … created at t0+at.
func many(n int, at time.Duration) []Task {
	out := make([]Task, n)
	for i := range out {
		out[i] = tk(registry.ActionHeartbeat, fmt.Sprintf("i%03d", i), at)
	}
	return out
}

var actionAbbrev = map[registry.Action]string{
	registry.ActionRegister:             "R",
	registry.ActionHeartbeat:            "H",
	registry.ActionCancel:               "C",
	registry.ActionStatusUpdate:         "S",
	registry.ActionDeleteStatusOverride: "D",
}

// label reads "H:a@2s": action, instance id, creation time after t0.
func label(t Task) string {
	return fmt.Sprintf("%s:%s@%s", actionAbbrev[t.Action], t.Key.ID, t.CreatedAt.Sub(t0))
}

func labels(ts []Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = label(t)
	}
	return out
}

// pending lists b's queue front to back, and checks that the heartbeat
// list and the index agree with it.
func pending(tb testing.TB, b *batcher) []string {
	tb.Helper()
	var all, hbs []string
	if b.runNext < len(b.run) {
		if b.head != nil {
			tb.Errorf("a run is pending beside the lists")
		}
		for _, t := range b.run[b.runNext:] {
			all = append(all, label(t))
		}
	}
	for nd := b.head; nd != nil; nd = nd.next {
		all = append(all, label(nd.task))
		if nd.task.Action == registry.ActionHeartbeat {
			hbs = append(hbs, label(nd.task))
		}
		if b.index[nd.task.id()] != nd {
			tb.Errorf("index does not point at %s", label(nd.task))
		}
	}
	var gotHBs []string
	for nd := b.hbHead; nd != nil; nd = nd.hbNext {
		gotHBs = append(gotHBs, label(nd.task))
	}
	if !slices.Equal(gotHBs, hbs) {
		tb.Errorf("heartbeat list = %v, want %v", gotHBs, hbs)
	}
	if run := len(b.run) - b.runNext; len(all) != b.len() || len(b.index)+run != b.len() {
		tb.Errorf("len() = %d, index %d, run %d, list %d", b.len(), len(b.index), run, len(all))
	}
	return all
}

func TestBatcher_AddTakeRequeue(t *testing.T) {
	type step struct {
		at      time.Duration
		add     []Task
		take    int      // > 0: take a batch of at most take tasks at t0+at
		requeue bool     // put the last taken batch back at the front at t0+at
		want    []string // the batch taken, when set
		wantN   int      // its size (checked when want is nil)
	}
	type counts struct{ replaced, overflow, expired uint64 }
	hb, reg, cancel := registry.ActionHeartbeat, registry.ActionRegister, registry.ActionCancel
	status, del := registry.ActionStatusUpdate, registry.ActionDeleteStatusOverride
	burst := many(600, time.Millisecond)
	six := []Task{
		withRenewal(tk(reg, "a", 0), 10), tk(hb, "b", 0), withRenewal(tk(hb, "c", 0), 0),
		tk(cancel, "d", 0), tk(status, "e", 0), tk(del, "f", 0),
	}

	tests := []struct {
		name        string
		maxQueue    int // 0: 10000
		steps       []step
		wantPending []string
		want        counts
	}{
		{
			name: "600 tasks queued while a batch is in flight go out as 250, 250, 100",
			steps: []step{
				{add: []Task{tk(hb, "lone", 0)}},
				{take: 250, want: []string{"H:lone@0s"}}, // in flight
				{at: time.Millisecond, add: burst},
				{at: time.Second, take: 250, want: labels(burst[:250])},
				{at: time.Second, take: 250, want: labels(burst[250:500])},
				{at: time.Second, take: 250, want: labels(burst[500:])},
				{at: time.Second, take: 250, wantN: 0},
			},
		},
		{
			name: "a newer task for the same instance and action replaces the pending one and moves to the back",
			steps: []step{
				{add: []Task{tk(hb, "a", 0), tk(hb, "b", time.Second), tk(hb, "a", 2*time.Second)}},
				{at: 2 * time.Second, take: 250, want: []string{"H:b@1s", "H:a@2s"}},
			},
			want: counts{replaced: 1},
		},
		{
			name: "a task added after part of a round was taken replaces the round's pending one",
			steps: []step{
				{add: []Task{tk(hb, "a", 0), tk(hb, "b", 0), tk(hb, "c", 0)}},
				{take: 1, want: []string{"H:a@0s"}},
				{at: time.Second, add: []Task{tk(hb, "b", time.Second)}},
			},
			wantPending: []string{"H:c@0s", "H:b@1s"},
			want:        counts{replaced: 1},
		},
		{
			// Eureka keeps the replaced task's place: R@2s, C@1s, and the
			// instance is cancelled on the peer.
			name: "register, cancel, register keeps its order",
			steps: []step{
				{add: []Task{tk(reg, "a", 0), tk(cancel, "a", time.Second), tk(reg, "a", 2*time.Second)}},
				{at: 2 * time.Second, take: 250, want: []string{"C:a@1s", "R:a@2s"}},
			},
			want: counts{replaced: 1},
		},
		{
			name: "different actions for one instance are all kept",
			steps: []step{
				{add: []Task{tk(reg, "a", 0), tk(hb, "a", 0), tk(status, "a", 0), tk(del, "a", 0), tk(cancel, "a", 0)}},
				{take: 250, want: []string{"R:a@0s", "H:a@0s", "S:a@0s", "D:a@0s", "C:a@0s"}},
			},
		},
		{
			name:     "take returns at most max tasks",
			maxQueue: 10,
			steps: []step{
				{add: []Task{tk(reg, "a", 0), tk(reg, "b", 0), tk(reg, "c", 0)}},
				{take: 2, want: []string{"R:a@0s", "R:b@0s"}},
			},
			wantPending: []string{"R:c@0s"},
		},
		{
			name:     "overflow drops the oldest heartbeat first, then the oldest task",
			maxQueue: 3,
			steps: []step{
				{add: []Task{tk(reg, "a", 0), tk(hb, "b", 0), tk(hb, "c", 0)}},
				{add: []Task{tk(reg, "d", 0)}},    // drops H:b
				{add: []Task{tk(cancel, "e", 0)}}, // drops H:c
				{add: []Task{tk(cancel, "f", 0)}}, // no heartbeat left: drops R:a
				{add: []Task{tk(cancel, "f", 1)}}, // a replacement needs no room
			},
			wantPending: []string{"R:d@0s", "C:e@0s", "C:f@1ns"},
			want:        counts{overflow: 3, replaced: 1},
		},
		{
			name:        "nothing expires at its exact age",
			steps:       []step{{add: six}, {at: 10 * time.Second, take: 250, wantN: 6}},
			wantPending: nil,
		},
		{
			name: "a register expires after the instance's renewal interval",
			steps: []step{
				{add: six},
				{at: 10*time.Second + 1, take: 250, want: []string{"H:b@0s", "H:c@0s", "C:d@0s", "S:e@0s", "D:f@0s"}},
			},
			want: counts{expired: 1},
		},
		{
			name: "cancel and status tasks expire after TaskMaxAge (20 s here)",
			steps: []step{
				{add: six},
				{at: 20*time.Second + 1, take: 250, want: []string{"H:b@0s", "H:c@0s"}},
			},
			want: counts{expired: 4},
		},
		{
			// Eureka would keep them for the 90 s lease duration (bug 19).
			name: "heartbeats without a renewal interval expire after 30 s",
			steps: []step{
				{add: six},
				{at: 30 * time.Second, take: 250, want: []string{"H:b@0s", "H:c@0s"}},
				{add: six},
				{at: 30*time.Second + 1, take: 250, wantN: 0},
			},
			want: counts{expired: 4 + 6},
		},
		{
			name: "expired tasks do not count toward the batch size",
			steps: []step{
				{add: []Task{tk(cancel, "a", 0), tk(hb, "b", 25*time.Second), tk(hb, "c", 25*time.Second), tk(hb, "d", 25*time.Second)}},
				{at: 25 * time.Second, take: 2, want: []string{"H:b@25s", "H:c@25s"}},
			},
			wantPending: []string{"H:d@25s"},
			want:        counts{expired: 1},
		},
		{
			name: "a task that is already expired when added is dropped",
			steps: []step{
				{at: 31 * time.Second, add: []Task{tk(hb, "a", 0)}},
			},
			want: counts{expired: 1},
		},
		{
			name: "requeueFront puts a failed batch before newer tasks and skips superseded ones",
			steps: []step{
				{add: []Task{tk(hb, "a", 0), tk(hb, "b", 0), tk(hb, "c", 0)}},
				{at: time.Second, take: 250, want: []string{"H:a@0s", "H:b@0s", "H:c@0s"}},
				{at: 2 * time.Second, add: []Task{tk(hb, "b", 2*time.Second), tk(reg, "d", 2*time.Second)}},
				{at: 3 * time.Second, requeue: true},
			},
			wantPending: []string{"H:a@0s", "H:c@0s", "H:b@2s", "R:d@2s"},
			want:        counts{replaced: 1},
		},
		{
			name: "requeueFront skips expired tasks",
			steps: []step{
				{add: []Task{tk(cancel, "a", 0), tk(hb, "b", 0), tk(reg, "c", 5*time.Second)}},
				{at: 5 * time.Second, take: 250, wantN: 3},
				{at: 25 * time.Second, requeue: true}, // C:a is 25 s old, more than TaskMaxAge
			},
			wantPending: []string{"H:b@0s", "R:c@5s"},
			want:        counts{expired: 1},
		},
		{
			name:     "requeueFront respects the bound: oldest heartbeat first",
			maxQueue: 3,
			steps: []step{
				{add: []Task{tk(reg, "a", 0), tk(reg, "b", 0)}},
				{take: 250, wantN: 2},
				{add: []Task{tk(hb, "c", time.Second), tk(reg, "d", time.Second), tk(reg, "e", time.Second)}},
				{at: time.Second, requeue: true},
			},
			wantPending: []string{"R:b@0s", "R:d@1s", "R:e@1s"},
			want:        counts{overflow: 2},
		},
	}
	// Each step's tasks are added one by one, and again as a round (as the
	// feed hands them over, marked distinct when they are): the batcher
	// keeps a distinct round that finds nothing pending as it came, and
	// must behave the same.
	for _, mode := range []string{"add", "round"} {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				maxQueue := tt.maxQueue
				if maxQueue == 0 {
					maxQueue = 10000
				}
				b := newBatcher(maxQueue, 20*time.Second, 30*time.Second)
				var last []Task
				for i, s := range tt.steps {
					now := t0.Add(s.at)
					if mode == "round" {
						b.addRound(s.add, distinctTasks(s.add), now)
					} else {
						for _, task := range s.add {
							b.add(task, now)
						}
					}
					if s.requeue {
						b.requeueFront(last, now)
					}
					if s.take > 0 {
						last = b.take(now, s.take)
						got := labels(last)
						if s.want != nil && !slices.Equal(got, s.want) {
							t.Errorf("step %d: take(t0+%s, %d) = %s, want %s", i, s.at, s.take, short(got), short(s.want))
						}
						if s.want == nil && len(got) != s.wantN {
							t.Errorf("step %d: take(t0+%s, %d) returned %d tasks, want %d", i, s.at, s.take, len(got), s.wantN)
						}
					}
				}
				if got := pending(t, b); !slices.Equal(got, tt.wantPending) {
					t.Errorf("pending = %v, want %v", got, tt.wantPending)
				}
				got := counts{b.replaced, b.overflow, b.expired}
				if got != tt.want {
					t.Errorf("counts = %+v, want %+v", got, tt.want)
				}
			})
		}
	}
}

// distinctTasks reports whether no two tasks share an instance and action.
func distinctTasks(ts []Task) bool {
	seen := map[taskID]bool{}
	for i := range ts {
		seen[ts[i].id()] = true
	}
	return len(seen) == len(ts)
}

// short abbreviates long label lists in failure messages.
func short(ls []string) string {
	if len(ls) <= 6 {
		return "[" + strings.Join(ls, " ") + "]"
	}
	return fmt.Sprintf("[%s … %s] (%d)", strings.Join(ls[:3], " "), strings.Join(ls[len(ls)-3:], " "), len(ls))
}

// Steady heartbeat traffic replaces pending tasks and recycles nodes: no
// allocation per task once the queue has its shape.
func TestBatcher_Add_replacementDoesNotAllocate(t *testing.T) {
	b := newBatcher(100, 30*time.Second, 30*time.Second)
	tasks := many(50, 0)
	for _, task := range tasks {
		b.add(task, t0)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		b.add(tasks[i%len(tasks)], t0)
		i++
	})
	if allocs != 0 {
		t.Errorf("add of a replacement allocates %v times, want 0", allocs)
	}
	if b.len() != 50 {
		t.Errorf("len() = %d, want 50", b.len())
	}
}
