package simclient

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Unix(1718000000, 0)

func TestInitialDue(t *testing.T) {
	tests := []struct {
		i, n     int
		interval time.Duration
		want     time.Duration // after t0
	}{
		{0, 1, 30 * time.Second, 30 * time.Second},
		{0, 3, 30 * time.Second, 10 * time.Second},
		{1, 3, 30 * time.Second, 20 * time.Second},
		{2, 3, 30 * time.Second, 30 * time.Second},
		{0, 10000, 30 * time.Second, 3 * time.Millisecond},
		{9999, 10000, 30 * time.Second, 30 * time.Second},
		{4999, 10000, 30 * time.Second, 15 * time.Second},
	}
	for _, tt := range tests {
		if got := initialDue(t0, tt.i, tt.n, tt.interval).Sub(t0); got != tt.want {
			t.Errorf("initialDue(t0, %d, %d, %s) = t0+%s, want t0+%s", tt.i, tt.n, tt.interval, got, tt.want)
		}
	}
}

func TestNextDue(t *testing.T) {
	iv := 30 * time.Second
	tests := []struct {
		name      string
		due, done time.Duration // after t0
		want      time.Duration
	}{
		{"quick renewal keeps the phase", 0, 5 * time.Millisecond, 30 * time.Second},
		{"slow renewal keeps the phase", 0, 29 * time.Second, 30 * time.Second},
		{"renewal longer than the interval: at once", 0, 31 * time.Second, 31 * time.Second},
		{"late start keeps the due phase", 10 * time.Second, 12 * time.Second, 40 * time.Second},
	}
	for _, tt := range tests {
		if got := nextDue(t0.Add(tt.due), t0.Add(tt.done), iv).Sub(t0); got != tt.want {
			t.Errorf("%s: nextDue(t0+%s, t0+%s) = t0+%s, want t0+%s", tt.name, tt.due, tt.done, got, tt.want)
		}
	}
}

func TestSchedule_popDue(t *testing.T) {
	s := newSchedule([]dueItem{{t0.Add(3 * time.Second), 3}, {t0.Add(time.Second), 1}, {t0.Add(2 * time.Second), 2}})
	if _, wait, ok := s.popDue(t0); ok || wait != time.Second {
		t.Fatalf("popDue(t0) = ok %v, wait %s; want not due, 1s", ok, wait)
	}
	var got []int
	for {
		it, _, ok := s.popDue(t0.Add(2 * time.Second))
		if !ok {
			break
		}
		got = append(got, it.idx)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("due at t0+2s: %v, want [1 2]", got)
	}
	s.push(dueItem{t0, 0})
	if it, _, ok := s.popDue(t0); !ok || it.idx != 0 {
		t.Errorf("after pushing an earlier item: popDue = %v %v, want item 0", it, ok)
	}
	s.popDue(t0.Add(time.Hour))
	if _, wait, ok := s.popDue(t0); ok || wait != -1 || s.len() != 0 {
		t.Errorf("empty schedule: ok %v, wait %s, len %d; want false, -1, 0", ok, wait, s.len())
	}
}

func TestSchedule_run_wakesOnPush(t *testing.T) {
	s := newSchedule(nil)
	jobs := make(chan dueItem)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.run(ctx, jobs); close(done) }()
	// The scheduler sleeps on an empty heap; a due push must wake it.
	s.push(dueItem{time.Now().Add(-time.Second), 7})
	if it := <-jobs; it.idx != 7 {
		t.Errorf("job = %d, want 7", it.idx)
	}
	cancel()
	<-done
}
