package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// logger writes timestamped lines.
type logger struct {
	// mu guards w, so that lines from concurrent scenarios do not interleave.
	mu sync.Mutex
	w  io.Writer
	t0 time.Time
}

func newLogger(w io.Writer) *logger { return &logger{w: w, t0: time.Now()} }

func (l *logger) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

// report collects what a scenario did, what it measured and what failed.
type report struct {
	name     string
	out      *logger
	start    time.Time
	figures  []string
	failures []string
	elapsed  time.Duration
}

func newReport(name string, out *logger) *report {
	return &report{name: name, out: out, start: time.Now()}
}

// step prints an action as it happens.
func (r *report) step(format string, args ...any) {
	r.out.printf("  [%6.1fs] %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// figure records a measurement for the end of the scenario.
func (r *report) figure(format string, args ...any) {
	r.figures = append(r.figures, fmt.Sprintf(format, args...))
}

// check records a failure unless ok.
func (r *report) check(ok bool, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if ok {
		r.step("ok: %s", msg)
		return
	}
	r.fail("%s", msg)
}

func (r *report) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.failures = append(r.failures, msg)
	r.step("FAIL: %s", msg)
}

func (r *report) passed() bool { return len(r.failures) == 0 }

func (r *report) verdict() string {
	if r.passed() {
		return "PASS"
	}
	return "FAIL"
}

func (r *report) print() {
	r.out.printf("  figures:\n")
	for _, f := range r.figures {
		r.out.printf("    %s\n", f)
	}
	r.out.printf("  %s %s\n", r.verdict(), r.name)
}
