package simclient

import (
	"reflect"
	"sync"
	"testing"
)

func TestOrderServers(t *testing.T) {
	a1, b1, a2, c1 := Server{"a", "http://a1/"}, Server{"b", "http://b1/"}, Server{"a", "http://a2/"}, Server{"c", "http://c1/"}
	tests := []struct {
		zone string
		in   []Server
		want []Server
	}{
		{"a", []Server{b1, a1, c1, a2}, []Server{a1, a2, b1, c1}},
		{"b", []Server{a1, a2, b1, c1}, []Server{b1, a1, a2, c1}},
		{"c", []Server{a1, b1, c1}, []Server{c1, a1, b1}},
		{"x", []Server{b1, a1, c1}, []Server{b1, a1, c1}}, // no server in the zone: given order
	}
	for _, tt := range tests {
		if got := orderServers(tt.in, tt.zone); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("orderServers(%v, %q) = %v, want %v", tt.in, tt.zone, got, tt.want)
		}
	}
}

func TestServerSet_failed_wrapsAround(t *testing.T) {
	s := newServerSet([]Server{{"b", "http://b/"}, {"a", "http://a/"}, {"c", "http://c/"}}, "a")
	var got []string
	for range 4 {
		i, srv := s.current()
		got = append(got, srv.Zone)
		if !s.failed(i) {
			t.Fatalf("failed(%d) = false, want true", i)
		}
	}
	if want := []string{"a", "b", "c", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("servers in turn = %v, want %v", got, want)
	}
}

func TestServerSet_failed_once(t *testing.T) {
	s := newServerSet([]Server{{"a", "http://a/"}, {"b", "http://b/"}, {"c", "http://c/"}}, "a")
	// Many requests fail on server 0 at once: the fleet moves one step.
	var wg sync.WaitGroup
	var mu sync.Mutex
	moves := 0
	for range 20 {
		wg.Go(func() {
			if s.failed(0) {
				mu.Lock()
				moves++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if i, _ := s.current(); i != 1 || moves != 1 {
		t.Errorf("current = %d after %d moves, want 1 after 1", i, moves)
	}
}

func TestServerSet_singleServer(t *testing.T) {
	s := newServerSet([]Server{{"a", "http://a/"}}, "a")
	if s.failed(0) {
		t.Error("failed(0) = true with one server, want false (nowhere to go)")
	}
	if s.returnHome() {
		t.Error("returnHome() = true at home, want false")
	}
}

func TestServerSet_returnHome(t *testing.T) {
	s := newServerSet([]Server{{"a", "http://a/"}, {"b", "http://b/"}}, "a")
	s.failed(0)
	if !s.returnHome() {
		t.Fatal("returnHome() = false after a failover, want true")
	}
	if i, _ := s.current(); i != 0 {
		t.Errorf("current = %d, want 0", i)
	}
}
