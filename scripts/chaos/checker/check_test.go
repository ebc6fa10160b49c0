package main

import (
	"math/rand"
	"reflect"
	"testing"
	"time"
)

func op(kind string, out Outcome, inv, ack float64, val string) *Op {
	return &Op{Kind: kind, Out: out, Value: val, Node: 1,
		Invoke: time.Duration(inv * float64(time.Second)), Ack: time.Duration(ack * float64(time.Second))}
}

func values(ops []*Op) []string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Value)
	}
	return out
}

func TestCandidates_lastAcknowledgedAndConcurrentOnes(t *testing.T) {
	r := &run{}
	cases := []struct {
		name string
		ops  []*Op
		want []string
	}{
		{"sequential: the last", []*Op{op("metadata", OK, 1, 1.1, "a"), op("metadata", OK, 2, 2.1, "b")}, []string{"b"}},
		{"overlapping: either", []*Op{op("metadata", OK, 1, 2.5, "a"), op("metadata", OK, 2, 2.1, "b")}, []string{"a", "b"}},
		{"failed: never", []*Op{op("metadata", OK, 1, 1.1, "a"), op("metadata", Fail, 2, 2.1, "b")}, []string{"a"}},
		// Unknown outcome: it may land up to a second after its error.
		{"info then ok soon after: either", []*Op{op("metadata", Info, 1, 3, "a"), op("metadata", OK, 3.5, 3.6, "b")}, []string{"a", "b"}},
		{"info long before: superseded", []*Op{op("metadata", Info, 1, 3, "a"), op("metadata", OK, 9, 9.1, "b")}, []string{"b"}},
	}
	for _, c := range cases {
		if got := values(r.candidates(c.ops)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: candidates %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAckEff_pausedNodeAppliesOnResume(t *testing.T) {
	r := &run{faults: []*Fault{{Kind: "pause", A: 1, Start: 10 * time.Second, End: 20 * time.Second}}}
	o := op("override", Info, 11, 13, "x")
	if got := r.ackEff(o); got != 22*time.Second {
		t.Fatalf("ackEff %v, want 22s (resume + 2 s)", got)
	}
}

func TestParseApps_checkedAppsOnly(t *testing.T) {
	body := `{"applications":{"versions__delta":"1","apps__hashcode":"UP_2_","application":[
	 {"name":"CHKW","instance":[{"instanceId":"w-1","app":"CHKW","status":"OUT_OF_SERVICE","overriddenStatus":"OUT_OF_SERVICE","metadata":{"k":"m3"}}]},
	 {"name":"OTHER","instance":[{"instanceId":"x","app":"OTHER","status":"UP"}]},
	 {"name":"CHKF0","instance":{"instanceId":"f-00","app":"CHKF0","status":"UP","overriddenstatus":"UNKNOWN","metadata":{"k":"fleet"}}}]}}`
	got, err := parseApps([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]View{
		"CHKW/w-1":   {Status: "OUT_OF_SERVICE", Overridden: "OUT_OF_SERVICE", Meta: "m3"},
		"CHKF0/f-00": {Status: "UP", Overridden: "UNKNOWN", Meta: "fleet"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestSchedule_seededAndEveryKindBeforeRepeats(t *testing.T) {
	a := schedule(rand.New(rand.NewSource(7)), len(faultKinds))
	b := schedule(rand.New(rand.NewSource(7)), len(faultKinds))
	seen := map[string]bool{}
	for k := range a {
		if a[k].String() != b[k].String() {
			t.Fatalf("seed 7 gave two schedules: %v / %v", a[k], b[k])
		}
		seen[a[k].Kind] = true
		if a[k].A == a[k].B || a[k].A < 1 || a[k].A > 3 || a[k].B < 1 || a[k].B > 3 {
			t.Fatalf("fault %v: nodes %d, %d", a[k], a[k].A, a[k].B)
		}
	}
	if len(seen) != len(faultKinds) {
		t.Fatalf("kinds %v, want each of %v", seen, faultKinds)
	}
}

func TestQuantiles(t *testing.T) {
	if got := quantiles([]float64{3, 1, 2, 4}); got != "p50 2.00 p99 4.00 max 4.00 (n=4)" {
		t.Fatal(got)
	}
}

func TestHears_followsTheFaults(t *testing.T) {
	s := time.Second
	r := &run{faults: []*Fault{
		{Kind: "oneway", A: 1, B: 2, Start: 10 * s, End: 20 * s},
		{Kind: "ring", A: 2, B: 3, Start: 30 * s, End: 40 * s},
		{Kind: "pause", A: 3, Start: 50 * s, End: 60 * s},
	}}
	cases := []struct {
		from, to int
		at       time.Duration
		want     bool
	}{
		{1, 2, 5 * s, true},
		{1, 2, 15 * s, false}, {2, 1, 15 * s, false}, {1, 3, 15 * s, true},
		{2, 3, 35 * s, false}, {3, 2, 35 * s, false}, {2, 1, 35 * s, true}, {1, 3, 35 * s, true},
		{1, 3, 55 * s, false}, {3, 2, 55 * s, false}, {1, 2, 55 * s, true},
	}
	for _, c := range cases {
		if got := r.hears(c.from, c.to, c.at); got != c.want {
			t.Errorf("hears(n%d → n%d at %v) = %v, want %v", c.from, c.to, c.at, got, c.want)
		}
	}
}
