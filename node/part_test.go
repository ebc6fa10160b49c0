package node

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// recorder is a part that writes its starts and stops to a shared log.
type recorder struct {
	name string
	fail error // Start's error
	log  *[]string
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Start(context.Context) error {
	if r.fail != nil {
		return r.fail
	}
	*r.log = append(*r.log, "start "+r.name)
	return nil
}

func (r *recorder) Stop(context.Context) error {
	*r.log = append(*r.log, "stop "+r.name)
	return nil
}

func TestParts_startInOrderStopInReverse(t *testing.T) {
	var log []string
	ps := &parts{list: []entry{
		{&recorder{name: "a", log: &log}, atStart},
		{&recorder{name: "b", log: &log}, atOpen},
		{&recorder{name: "c", log: &log}, atStart},
		{&recorder{name: "d", log: &log}, atOpen},
	}}
	ctx := context.Background()
	if err := ps.start(ctx, atStart, nil); err != nil {
		t.Fatal(err)
	}
	opened := false
	if err := ps.start(ctx, atOpen, func() { opened = true }); err != nil || !opened {
		t.Fatalf("open: %v, opened %v", err, opened)
	}
	if !ps.close() || ps.close() {
		t.Fatal("close: want true once, then false")
	}
	if err := ps.stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, ", "), "start a, start c, start b, start d, stop d, stop c, stop b, stop a"; got != want {
		t.Errorf("log = %s, want %s", got, want)
	}
}

// A start that fails leaves stopped, in reverse, what had started, and
// nothing after it starts; a node closed before it opens starts nothing
// at the open step.
func TestParts_Start_failureStopsWhatStarted(t *testing.T) {
	var log []string
	boom := errors.New("boom")
	ps := &parts{list: []entry{
		{&recorder{name: "a", log: &log}, atStart},
		{&recorder{name: "b", log: &log}, atStart},
		{&recorder{name: "c", fail: boom, log: &log}, atStart},
		{&recorder{name: "d", log: &log}, atStart},
		{&recorder{name: "e", log: &log}, atOpen},
	}}
	ctx := context.Background()
	if err := ps.start(ctx, atStart, nil); !errors.Is(err, boom) {
		t.Fatalf("start: %v, want %v", err, boom)
	}
	ps.close()
	opened := false
	if err := ps.start(ctx, atOpen, func() { opened = true }); err != nil || opened {
		t.Fatalf("open after close: %v, opened %v; want nothing", err, opened)
	}
	_ = ps.stop(ctx)
	if got, want := strings.Join(log, ", "), "start a, start b, stop b, stop a"; got != want {
		t.Errorf("log = %s, want %s", got, want)
	}
}

// task runs before while its goroutine still runs, after once it returned.
func TestTask_Stop_beforeThenAfter(t *testing.T) {
	var log []string
	running := make(chan struct{})
	tk := &task{name: "t",
		run: func(ctx context.Context) {
			close(running)
			<-ctx.Done()
			log = append(log, "run returned")
		},
		before: func(context.Context) error { log = append(log, "before"); return nil },
		after:  func() { log = append(log, "after") },
	}
	if err := tk.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-running
	if err := tk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(log, ", "), "before, run returned, after"; got != want {
		t.Errorf("log = %s, want %s", got, want)
	}
}
