package testwait

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records instead of stopping the
// test, so the failure path itself can be checked.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	for _, a := range args {
		r.failed += " " + toString(a)
	}
}

func toString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case error:
		return v.Error()
	case time.Duration:
		return v.String()
	}
	return ""
}

func TestFor_ReturnsOnceConditionHolds(t *testing.T) {
	calls := 0
	For(t, time.Second, "third call", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

func TestFor_FailsNamingWhatAndLastReason(t *testing.T) {
	r := &recorder{TB: t}
	// For returns after Fatalf: the recorder does not stop the goroutine.
	For(r, 30*time.Millisecond, "the peer answers", func() error { return errors.New("connection refused") })
	if !strings.Contains(r.failed, "the peer answers") || !strings.Contains(r.failed, "connection refused") {
		t.Fatalf("failure %q does not name what and why", r.failed)
	}
}

func TestTrue_FailsNamingWhat(t *testing.T) {
	r := &recorder{TB: t}
	True(r, 30*time.Millisecond, "the node opens", func() bool { return false })
	if !strings.Contains(r.failed, "the node opens") {
		t.Fatalf("failure %q does not name what", r.failed)
	}
}
