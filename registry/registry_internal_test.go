package registry

import (
	"testing"
	"time"
	"unsafe"
)

var t0 = time.UnixMilli(1718000000000)

func TestMeasuredRate_Count_slidingWindow(t *testing.T) {
	m := NewMeasuredRate(time.Minute, t0)
	for i := 0; i < 3; i++ {
		m.Increment(t0.Add(time.Duration(i) * time.Second))
	}
	steps := []struct {
		at           time.Duration
		want         int64
		wantComplete bool
	}{
		{59 * time.Second, 0, false},
		{60 * time.Second, 3, true},
		{64 * time.Second, 3, true},
		// The window slides by a twelfth: the slice holding the events
		// leaves it at 65 s.
		{65 * time.Second, 0, true},
		{130 * time.Second, 0, true},
	}
	for _, s := range steps {
		got, complete := m.Count(t0.Add(s.at))
		if got != s.want || complete != s.wantComplete {
			t.Errorf("Count(t0+%s) = %d, %v, want %d, %v", s.at, got, complete, s.want, s.wantComplete)
		}
	}
}

func TestMeasuredRate_Count_skippedWindowReadsZero(t *testing.T) {
	m := NewMeasuredRate(time.Minute, t0)
	m.Increment(t0.Add(10 * time.Second))
	// Two boundaries crossed: the window holding the event is not the last one.
	if got, _ := m.Count(t0.Add(125 * time.Second)); got != 0 {
		t.Errorf("Count(t0+125s) = %d, want 0", got)
	}
	m.Increment(t0.Add(130 * time.Second))
	if got, _ := m.Count(t0.Add(180 * time.Second)); got != 1 {
		t.Errorf("Count(t0+180s) = %d, want 1", got)
	}
}

func TestEvictionCompensation(t *testing.T) {
	tests := []struct {
		name      string
		now, last time.Time
		want      time.Duration
	}{
		{"first run", t0, time.Time{}, 0},
		{"on time", t0.Add(time.Minute), t0, 0},
		{"early", t0.Add(50 * time.Second), t0, 0},
		{"late by 25s", t0.Add(85 * time.Second), t0, 25 * time.Second},
	}
	for _, tt := range tests {
		if got := evictionCompensation(tt.now, tt.last, time.Minute); got != tt.want {
			t.Errorf("%s: evictionCompensation = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestEvictionLimit(t *testing.T) {
	tests := []struct {
		size, want int
	}{{0, 0}, {1, 1}, {10, 2}, {20, 3}, {100, 15}, {1000, 150}}
	for _, tt := range tests {
		if got := evictionLimit(tt.size, 0.85); got != tt.want {
			t.Errorf("evictionLimit(%d, 0.85) = %d, want %d", tt.size, got, tt.want)
		}
	}
}

func TestRenewsThreshold(t *testing.T) {
	tests := []struct {
		expected float64
		want     int64
	}{{200, 170}, {40, 34}, {2, 1}, {4, 3}, {6, 5}, {0, 0}, {60.0 / 7 * 7, 51}}
	for _, tt := range tests {
		if got := renewsThreshold(tt.expected, 0.85); got != tt.want {
			t.Errorf("renewsThreshold(%v, 0.85) = %d, want %d", tt.expected, got, tt.want)
		}
	}
}

func TestLeaseExpired_durationCountedOnce(t *testing.T) {
	// Eureka's Lease.renew adds the duration and isExpired adds it again
	// (Netflix/eureka#531); here the lease ends at last renewal + duration.
	d := 90 * time.Second
	if leaseExpired(t0.Add(d), t0, d, 0) {
		t.Error("expired exactly at last renewal + duration, want still live")
	}
	if !leaseExpired(t0.Add(d+time.Millisecond), t0, d, 0) {
		t.Error("live after last renewal + duration, want expired")
	}
	if leaseExpired(t0.Add(d+time.Second), t0, d, 2*time.Second) {
		t.Error("expired within the grace, want live")
	}
}

func TestResolveStatus(t *testing.T) {
	up := &Instance{Status: StatusUp}
	oos := &Instance{Status: StatusOutOfService}
	down := &Instance{Status: StatusDown}
	tests := []struct {
		name       string
		incoming   Status
		override   Status
		existing   *Instance
		replicated bool
		want       Status
	}{
		{"down is taken as is", StatusDown, StatusOutOfService, up, false, StatusDown},
		{"starting is taken as is", StatusStarting, "", up, false, StatusStarting},
		{"unknown is taken as is", StatusUnknown, StatusUp, up, false, StatusUnknown},
		{"override wins over up", StatusUp, StatusOutOfService, up, false, StatusOutOfService},
		{"UNKNOWN override is no override", StatusUp, StatusUnknown, nil, false, StatusUp},
		{"server's OOS wins over client's UP", StatusUp, "", oos, false, StatusOutOfService},
		{"but not for replicated calls", StatusUp, "", oos, true, StatusUp},
		{"existing DOWN does not stick", StatusUp, "", down, false, StatusUp},
		{"fallback", StatusOutOfService, "", nil, false, StatusOutOfService},
	}
	for _, tt := range tests {
		if got := resolveStatus(tt.incoming, tt.override, tt.existing, tt.replicated); got != tt.want {
			t.Errorf("%s: resolveStatus = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestDeltaQueue_pruneBefore(t *testing.T) {
	var q deltaQueue
	for i := 0; i < 10; i++ {
		q.push(deltaRecord{at: t0.Add(time.Duration(i) * time.Second)})
	}
	if n := q.pruneBefore(t0.Add(4 * time.Second)); n != 4 {
		t.Fatalf("pruned %d, want 4", n)
	}
	if q.len() != 6 || !q.records()[0].at.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("after prune: len %d, first at %v", q.len(), q.records()[0].at)
	}
	if n := q.pruneBefore(t0.Add(time.Hour)); n != 6 || q.len() != 0 {
		t.Fatalf("pruned %d, len %d, want 6, 0", n, q.len())
	}
}

// More than 65,536 versions in one millisecond: the counter carries into
// the milliseconds, and versions keep growing.
func TestHLC_counterCarries(t *testing.T) {
	var h hlc
	now := time.UnixMilli(1_700_000_000_000)
	last := h.next(now)
	for range 70_000 {
		v := h.next(now)
		if v <= last {
			t.Fatalf("version %d not above %d", v, last)
		}
		last = v
	}
	if VersionTime(last).Equal(now) {
		t.Fatal("70,000 versions in one ms did not carry into the next ms")
	}
	if v := h.next(now.Add(time.Second)); !VersionTime(v).Equal(now.Add(time.Second)) || v <= last {
		t.Fatalf("a second later: %d (%s)", v, VersionTime(v))
	}
}

// TestLease_sizeClass keeps the lease in the 128-byte size class: one more
// field past it costs 16 bytes an instance (the next class is 144), 16 MB
// at a million instances, against the memory figures' 1.5 KiB an instance.
func TestLease_sizeClass(t *testing.T) {
	if got := unsafe.Sizeof(lease{}); got > 128 {
		t.Errorf("lease is %d bytes, past the 128-byte size class: reorder or shrink its fields", got)
	}
}
