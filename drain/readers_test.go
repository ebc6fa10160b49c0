package drain

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestReaders_confirmationIsByVersion(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	rs := NewReaders(10, 90*time.Second)
	full := Reader{IdentityName: "DefaultClient", IdentityID: "10.0.0.1", Address: "10.0.0.1"}
	app := Reader{Agent: "fargo", Address: "10.0.0.2"}
	other := Reader{User: "ops", Address: "10.0.0.3"}
	rs.NoteAll(full, 5, t0)
	rs.NoteApp(app, "ORDERS", 5, t0)
	rs.NoteApp(other, "BILLING", 9, t0) // reads another app only

	drainAt := t0.Add(time.Second).UnixMilli()
	since := drainAt - (90 * time.Second).Milliseconds()
	got := rs.Of("ORDERS", since, 7) // the drain applied at version 7
	if len(got) != 2 || got[0].Confirmed || got[1].Confirmed {
		t.Fatalf("before any read past the drain: %+v", got)
	}
	// A read served at an older version (a payload built before the
	// change) does not confirm; one at the drain's version does.
	rs.NoteAll(full, 6, t0.Add(2*time.Second))
	rs.NoteApp(app, "ORDERS", 7, t0.Add(2*time.Second))
	for _, r := range rs.Of("ORDERS", since, 7) {
		if want := r.Client == "fargo"; r.Confirmed != want {
			t.Fatalf("%s confirmed %v, want %v", r.Client, r.Confirmed, want)
		}
	}
	// A node that has not applied the mark (seq 0) has everyone pending.
	for _, r := range rs.Of("ORDERS", since, 0) {
		if r.Confirmed {
			t.Fatalf("%s confirmed a drain not applied", r.Client)
		}
	}
	// Readers that last read before the window are not waited for.
	if got := rs.Of("ORDERS", t0.Add(time.Hour).UnixMilli(), 7); len(got) != 0 {
		t.Fatalf("readers from before the window: %+v", got)
	}
	if c := full.Client(); c != "DefaultClient (10.0.0.1)" {
		t.Fatalf("client %q", c)
	}
	if c := other.Client(); c != "user ops" {
		t.Fatalf("client %q", c)
	}
}

func TestReaders_capacity(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	rs := NewReaders(2, time.Minute)
	rs.NoteAll(Reader{Agent: "a"}, 1, t0)
	rs.NoteAll(Reader{Agent: "b"}, 1, t0.Add(50*time.Second))
	rs.NoteAll(Reader{Agent: "c"}, 1, t0.Add(50*time.Second)) // full: a is not idle long enough
	if rs.Len() != 2 || rs.Untracked() != 1 {
		t.Fatalf("full table: %d readers, %d untracked", rs.Len(), rs.Untracked())
	}
	rs.NoteAll(Reader{Agent: "c"}, 1, t0.Add(61*time.Second)) // a idle past the window: it goes
	if rs.Len() != 2 || rs.Untracked() != 1 {
		t.Fatalf("after the sweep: %d readers, %d untracked", rs.Len(), rs.Untracked())
	}
	if got := rs.Of("X", 0, 1); len(got) != 2 || got[0].Client == "a" || got[1].Client == "a" {
		t.Fatalf("readers %+v, want b and c", got)
	}
}

// A known reader's read allocates nothing: it is on every fetch.
func TestReaders_knownReaderAllocatesNothing(t *testing.T) {
	rs := NewReaders(0, time.Minute)
	r := Reader{IdentityName: "DefaultClient", IdentityVersion: "1.4", IdentityID: "10.0.0.1", Address: "10.0.0.1"}
	now := time.Now()
	rs.NoteAll(r, 1, now)
	rs.NoteApp(r, "ORDERS", 1, now)
	if n := testing.AllocsPerRun(100, func() {
		rs.NoteAll(r, 2, now)
		rs.NoteApp(r, "ORDERS", 2, now)
	}); n != 0 {
		t.Fatalf("%v allocations a read", n)
	}
}

func BenchmarkReaders_note(b *testing.B) {
	rs := NewReaders(0, time.Minute)
	readers := make([]Reader, 1000)
	for i := range readers {
		readers[i] = Reader{IdentityName: "DefaultClient", IdentityID: fmt.Sprint(i), Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)}
	}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rs.NoteAll(readers[i%len(readers)], uint64(i), now)
	}
}

// A client's headers cannot make a reader large: identity fields are cut
// (the same cut on every read, so the reader stays one).
func TestReaders_longIdentityIsCut(t *testing.T) {
	rs := NewReaders(0, time.Minute)
	long := strings.Repeat("x", 60_000)
	rs.NoteAll(Reader{IdentityName: long, Address: "10.0.0.1"}, 1, time.Now())
	rs.NoteAll(Reader{IdentityName: long + "y", Address: "10.0.0.1"}, 2, time.Now())
	got := rs.Of("X", 0, 2)
	if len(got) != 1 || len(got[0].Client) != MaxFieldLen || !got[0].Confirmed {
		t.Fatalf("readers %d, client of %d bytes", len(got), len(got[0].Client))
	}
}
