package persist_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/registry/registrytest"
)

// cancelledRegistry holds 8 instances and 3 tombstones, of 11 registered:
// two with the default 90 s lease and APP-1/i-1 with an hour's lease.
func cancelledRegistry(t *testing.T, clock *registrytest.Clock) *registry.Registry {
	t.Helper()
	r := newRegistry(t, clock)
	fill(t, r, 10)
	long := registrytest.NewInstance("APP-1", "i-long", registrytest.WithLeaseDuration(3600))
	if _, err := r.Apply(registry.RegisterOp(long)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []registry.InstanceKey{{App: "APP-2", ID: "i-2"}, {App: "APP-3", ID: "i-3"}, {App: "APP-1", ID: "i-long"}} {
		if _, err := r.Apply(registry.CancelOp(k.App, k.ID)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// rewrite replaces the part of the snapshot in dir from the first "from"
// to the trailer by with, and redoes the trailer, as a file written that
// way (an older build, or damage the checksum does not catch).
func rewrite(t *testing.T, dir, from, with string) {
	t.Helper()
	data, err := os.ReadFile(persist.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(data, []byte(from))
	end := bytes.LastIndex(data[:len(data)-1], []byte("\n")) + 1
	if start < 0 {
		t.Fatalf("no %q in the snapshot", from)
	}
	content := append(append(append([]byte{}, data[:start]...), with...), data[start+len(from):end]...)
	if with == "" {
		content = append([]byte{}, data[:start]...)
	}
	out := append(content, fmt.Sprintf("crc32c: %08x bytes: %d\n", crc32.Checksum(content, crc32.MakeTable(crc32.Castagnoli)), len(content))...)
	if err := os.WriteFile(persist.Path(dir), out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestWriteRead_keepsTombstones(t *testing.T) {
	clock := registrytest.NewClock()
	src := cancelledRegistry(t, clock)
	clock.Advance(20 * time.Second)
	dir := t.TempDir()
	tombs := src.LiveTombstones()
	if len(tombs) != 3 {
		t.Fatalf("%d live tombstones, want 3", len(tombs))
	}
	info, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), tombs, clock.Now())
	if err != nil || info.Tombstones != 3 || info.Instances != 8 {
		t.Fatalf("info %+v, %v", info, err)
	}
	f, err := persist.ReadFile(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.Tombstones) != fmt.Sprint(tombs) {
		t.Fatalf("read tombstones %v, wrote %v", f.Tombstones, tombs)
	}
	long := registry.InstanceKey{App: "APP-1", ID: "i-long"}
	for _, ts := range f.Tombstones {
		want := 90*time.Second + registry.DefaultConfig().TombstoneGrace - 20*time.Second
		if ts.Key == long {
			want = time.Hour + registry.DefaultConfig().TombstoneGrace - 20*time.Second
		}
		if ts.TTL != want {
			t.Fatalf("%v kept %s still, want %s", ts.Key, ts.TTL, want)
		}
	}

	// Restored ten minutes later: the 90 s ones ran out while the node was
	// down; the hour-long one is kept for what was left of it.
	clock.Advance(10 * time.Minute)
	dst := newRegistry(t, clock)
	if stored, refused := persist.Restore(dst, f.Instances); stored != 8 || len(refused) != 0 {
		t.Fatalf("restored %d, refused %v", stored, refused)
	}
	if kept := persist.RestoreTombstones(dst, f.Written, f.Tombstones, clock.Now()); kept != 1 {
		t.Fatalf("kept %d tombstones, want 1", kept)
	}
	got := dst.LiveTombstones()
	srcVersion, _ := src.Tombstone(long.App, long.ID)
	want := time.Hour + registry.DefaultConfig().TombstoneGrace - 20*time.Second - 10*time.Minute
	if len(got) != 1 || got[0].Key != long || got[0].Version != srcVersion || got[0].TTL != want {
		t.Fatalf("restored tombstones %v, want %v at version %d for %s", got, long, srcVersion, want)
	}
	if dst.RootDigest() != src.RootDigest() {
		t.Fatal("restored registry's digest differs")
	}

	// A peer's copy older than the cancel stays out, as before the restart.
	stale := registrytest.NewInstance("APP-1", "i-long", registrytest.WithLeaseDuration(3600))
	stale.WriteVersion = srcVersion - 1
	if in, _ := dst.Apply(registry.RegisterOp(stale).From(registry.OriginAntiEntropy)); in != nil {
		t.Fatal("a copy older than the restored tombstone came back")
	}
	if _, ok := dst.Copy(long.App, long.ID); ok {
		t.Fatal("a copy older than the restored tombstone is stored")
	}
	clock.Advance(want + time.Second)
	dst.EvictExpired()
	if n := dst.Tombstones().Kept; n != 0 {
		t.Fatalf("%d tombstones kept after their lifetime", n)
	}
}

// A file written before tombstones were kept loads, with none.
func TestRead_withoutTombstonesSection(t *testing.T) {
	clock := registrytest.NewClock()
	src := cancelledRegistry(t, clock)
	dir := t.TempDir()
	if _, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), src.LiveTombstones(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, "tombstones\n", "")
	f, err := persist.ReadFile(dir, "prod")
	if err != nil {
		t.Fatalf("a snapshot without tombstones: %v", err)
	}
	if len(f.Instances) != 8 || len(f.Tombstones) != 0 || f.Instances[0].WriteVersion == 0 {
		t.Fatalf("%d instances (version %d), %d tombstones", len(f.Instances), f.Instances[0].WriteVersion, len(f.Tombstones))
	}
}

// A damaged tombstones section refuses the whole file, as any other
// damage: nothing of it is loaded.
func TestRead_refusesCorruptTombstones(t *testing.T) {
	for name, row := range map[string]string{
		"not JSON":        `["APP-2","i-2",12`,
		"missing ttl":     `["APP-2","i-2",12]`,
		"extra value":     `["APP-2","i-2",12,5000,1]`,
		"negative ttl":    `["APP-2","i-2",12,-5]`,
		"string version":  `["APP-2","i-2","12",5000]`,
		"zero version":    `["APP-2","i-2",0,5000]`,
		"empty id":        `["APP-2","",12,5000]`,
		"fractional ttl":  `["APP-2","i-2",12,5000.5]`,
		"trailing tokens": `["APP-2","i-2",12,5000] x`,
	} {
		t.Run(name, func(t *testing.T) {
			clock := registrytest.NewClock()
			src := cancelledRegistry(t, clock)
			dir := t.TempDir()
			if _, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), src.LiveTombstones(), clock.Now()); err != nil {
				t.Fatal(err)
			}
			rewrite(t, dir, "tombstones\n", "tombstones\n"+row+"\n")
			f, err := persist.ReadFile(dir, "prod")
			if !errors.Is(err, persist.ErrCorrupt) || !strings.Contains(err.Error(), "tombstones line") {
				t.Fatalf("got %v, want a corrupt tombstones line", err)
			}
			if f.Instances != nil || f.Tombstones != nil {
				t.Fatal("a refused snapshot returned content")
			}
		})
	}
}
