package replicationtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/replication"
	"github.com/muster-registry/muster/replication/replicationtest"
)

func TestTransport_knobs(t *testing.T) {
	tr := replicationtest.NewTransport()
	b := replication.Batch{Tasks: []replication.Task{{Action: registry.ActionCancel, Key: registry.InstanceKey{App: "A", ID: "1"}}}}
	send := func(name string) error {
		_, err := tr.Send(context.Background(), replication.Peer{Name: name}, b)
		return err
	}
	steps := []struct {
		do        func()
		reachable map[string]bool
	}{
		{func() {}, map[string]bool{"a": true, "b": true, "c": true}},
		{func() { tr.Disconnect("b") }, map[string]bool{"a": true, "b": false, "c": true}},
		{func() { tr.Connect("b") }, map[string]bool{"a": true, "b": true, "c": true}},
		{func() { tr.Partition("a") }, map[string]bool{"a": true, "b": false, "c": false}},
		{func() { tr.Disconnect("a") }, map[string]bool{"a": false, "b": false, "c": false}},
		{func() { tr.Heal() }, map[string]bool{"a": true, "b": true, "c": true}},
	}
	for i, s := range steps {
		s.do()
		for name, want := range s.reachable {
			err := send(name)
			if got := err == nil; got != want {
				t.Errorf("step %d: Send to %s = %v, want reachable %v", i, name, err, want)
			}
			if err != nil && !errors.Is(err, replicationtest.ErrUnreachable) {
				t.Errorf("step %d: Send to %s = %v, want ErrUnreachable", i, name, err)
			}
		}
	}
	if got := len(tr.Batches()); got != 3*len(steps) {
		t.Errorf("recorded %d batches, want %d", got, 3*len(steps))
	}
}

func TestTransport_Respond(t *testing.T) {
	tr := replicationtest.NewTransport()
	tr.Respond = func(p replication.Peer, b replication.Batch) (replication.BatchResult, error) {
		return replication.BatchResult{}, &replication.StatusError{Code: 503}
	}
	_, err := tr.Send(context.Background(), replication.Peer{Name: "a"}, replication.Batch{})
	var se *replication.StatusError
	if !errors.As(err, &se) || se.Code != 503 {
		t.Errorf("Send = %v, want the hook's 503", err)
	}
	s := <-tr.Sent()
	if s.Peer.Name != "a" || s.Err != err {
		t.Errorf("recorded %+v", s)
	}
}
