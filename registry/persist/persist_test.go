package persist_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/persist"
	"github.com/muster-registry/muster/registry/registrytest"
)

func newRegistry(t *testing.T, clock *registrytest.Clock) *registry.Registry {
	t.Helper()
	cfg := registry.DefaultConfig()
	cfg.Now = clock.Now
	r, err := registry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fill(t *testing.T, r *registry.Registry, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		in := registrytest.NewInstance(fmt.Sprintf("APP-%d", i%7), fmt.Sprintf("i-%d", i),
			registrytest.WithMetadata(map[string]string{"zone": "z" + strconv.Itoa(i%3)}), registrytest.WithVIP("vip-"+strconv.Itoa(i%5)))
		if _, err := r.Apply(registry.RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
	}
}

// content is every client-visible field of every instance, for comparing
// two registries.
func content(s *registry.Snapshot) string {
	var b strings.Builder
	for _, app := range s.Apps {
		for _, iv := range app.Instances {
			in := iv.Instance
			fmt.Fprintf(&b, "%s/%s %s %s ov=%s ip=%s port=%v vip=%s dirty=%d md=%v\n", app.Name, in.ID(), in.HostName, in.Status,
				in.OverriddenStatus, in.IPAddr, in.Port, in.VIPAddress, in.LastDirtyTimestamp, in.Metadata)
		}
	}
	return b.String()
}

func TestWriteRead_roundTrip(t *testing.T) {
	clock := registrytest.NewClock()
	src := newRegistry(t, clock)
	fill(t, src, 50)
	if _, err := src.Apply(registry.StatusOp("APP-1", "i-1", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	info, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), nil, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if info.Instances != 50 || info.Bytes <= 0 || info.Path != filepath.Join(dir, persist.FileName) {
		t.Fatalf("info %+v", info)
	}
	if st, err := os.Stat(info.Path); err != nil || st.Size() != info.Bytes {
		t.Fatalf("file size %v, info says %d: %v", st, info.Bytes, err)
	}
	h, instances, err := readSnapshot(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if h.Cluster != "prod" || h.Node != "node-a" || h.Instances != 50 || !h.Written.Equal(clock.Now()) {
		t.Fatalf("header %+v", h)
	}

	// Restored a minute later into a new registry: same content, every
	// lease renewed at the restore.
	clock.Advance(time.Minute)
	dst := newRegistry(t, clock)
	stored, refused := persist.Restore(dst, instances)
	if stored != 50 || len(refused) != 0 {
		t.Fatalf("restored %d, refused %v", stored, refused)
	}
	if got, want := content(dst.Snapshot()), content(src.Snapshot()); got != want {
		t.Fatalf("restored registry differs:\n%s\nwant\n%s", got, want)
	}
	for _, app := range dst.Snapshot().Apps {
		for _, iv := range app.Instances {
			if iv.LastRenewalTimestamp != clock.Now().UnixMilli() {
				t.Fatalf("%s renewed at %d, want the restore time %d", iv.ID(), iv.LastRenewalTimestamp, clock.Now().UnixMilli())
			}
		}
	}
	// Warm self-preservation figures once open: 50 instances × 2/min.
	dst.OpenForTraffic()
	if sp := dst.SelfPreservationState(); sp.ExpectedRenewsPerMin != 100 {
		t.Fatalf("expected renewals after restore %v, want 100", sp.ExpectedRenewsPerMin)
	}
	// The instances that are alive renew every 30 s; APP-0/i-0 vanished
	// while the cluster was down. It goes one lease (90 s) after the
	// restore, not at once and not never: the figures are warm, so the
	// renewals of the others keep self-preservation off.
	var evictedAt time.Duration
	for step := 30 * time.Second; step <= 3*time.Minute && evictedAt == 0; step += 30 * time.Second {
		clock.Advance(30 * time.Second)
		for _, app := range dst.Snapshot().Apps {
			for _, iv := range app.Instances {
				if iv.ID() != "i-0" {
					if _, err := dst.Apply(registry.RenewOp(app.Name, iv.ID())); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		for _, k := range dst.EvictExpired() {
			if k.ID != "i-0" {
				t.Fatalf("evicted %v, which renews", k)
			}
			evictedAt = step
		}
	}
	if evictedAt != 120*time.Second {
		t.Fatalf("the vanished instance was evicted %s after the restore, want at the first run after its 90 s lease (120 s)", evictedAt)
	}
}

func TestRead_refusesBadFiles(t *testing.T) {
	clock := registrytest.NewClock()
	src := newRegistry(t, clock)
	fill(t, src, 20)
	dir := t.TempDir()
	if _, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(persist.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x20
		return b
	}
	bodyAt := bytes.Index(good, []byte(`"instanceId"`))
	cases := []struct {
		name string
		data []byte
		want error
		in   string // the reason names this
	}{
		{"empty file", nil, persist.ErrCorrupt, "does not start"},
		{"not a snapshot", []byte("hello\nworld\n"), persist.ErrCorrupt, "does not start"},
		{"truncated in the body", good[:len(good)/2], persist.ErrCorrupt, "trailer"},
		{"truncated in the trailer", good[:len(good)-5], persist.ErrCorrupt, "trailer"},
		{"trailer cut off", good[:bytes.LastIndex(good[:len(good)-1], []byte("\n"))+1], persist.ErrCorrupt, "trailer"},
		{"a bit flipped in an instance", flip(bodyAt + 3), persist.ErrCorrupt, "checksum"},
		{"a bit flipped in the header", flip(len("MUSTER-REGISTRY-SNAPSHOT 1\ncluster: p")), persist.ErrCorrupt, "checksum"},
		{"bytes appended", append(bytes.Clone(good), "x\n"...), persist.ErrCorrupt, "trailer"},
		{"future format", bytes.Replace(good, []byte("SNAPSHOT 1\n"), []byte("SNAPSHOT 9\n"), 1), persist.ErrVersion, "format"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(persist.Path(dir), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, instances, err := readSnapshot(dir, "prod")
			if !errors.Is(err, tc.want) || instances != nil {
				t.Fatalf("Read: %v, %d instances; want %v and none", err, len(instances), tc.want)
			}
			if !strings.Contains(err.Error(), persist.Path(dir)) || !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("error %q should name the file and say %q", err, tc.in)
			}
		})
	}

	t.Run("another cluster", func(t *testing.T) {
		if err := os.WriteFile(persist.Path(dir), good, 0o600); err != nil {
			t.Fatal(err)
		}
		_, instances, err := readSnapshot(dir, "staging")
		if !errors.Is(err, persist.ErrForeign) || instances != nil || !strings.Contains(err.Error(), `"prod"`) {
			t.Fatalf("Read as staging: %v (%d instances)", err, len(instances))
		}
	})
	t.Run("no snapshot", func(t *testing.T) {
		_, _, err := readSnapshot(t.TempDir(), "prod")
		if !errors.Is(err, persist.ErrNotFound) {
			t.Fatalf("Read of an empty dir: %v", err)
		}
	})
	t.Run("a checksummed file whose instance count lies", func(t *testing.T) {
		// Rewrite the header and recompute the trailer, as a buggy writer
		// would: the count check still catches it.
		text := string(good)
		text = strings.Replace(text, "instances: 20\n", "instances: 21\n", 1)
		content := text[:strings.LastIndex(text[:len(text)-1], "\n")+1]
		fixed := content + trailerFor(content)
		if err := os.WriteFile(persist.Path(dir), []byte(fixed), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readSnapshot(dir, "prod"); !errors.Is(err, persist.ErrCorrupt) || !strings.Contains(err.Error(), "header says 21") {
			t.Fatalf("Read: %v", err)
		}
	})
}

// TestWrite_crashMidWriteKeepsTheOldSnapshot kills a process that writes a
// large snapshot over and over (SIGKILL, at a random point of a write):
// the file left is always a whole snapshot, the old or a new one.
func TestWrite_crashMidWriteKeepsTheOldSnapshot(t *testing.T) {
	if dir := os.Getenv("PERSIST_CRASH_DIR"); dir != "" {
		crashWriter(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	clock := registrytest.NewClock()
	r := newRegistry(t, clock)
	fill(t, r, 10)
	if _, err := persist.Write(dir, "prod", "old", r.Snapshot(), nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWrite_crashMidWriteKeepsTheOldSnapshot$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PERSIST_CRASH_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Round 0 kills the child as soon as it has begun its first write
		// (a temporary file exists); later rounds once it has finished at
		// least one, most likely in the middle of the next.
		deadline := time.Now().Add(60 * time.Second)
		for {
			temps, _ := filepath.Glob(filepath.Join(dir, persist.FileName+".tmp-*"))
			if round == 0 && len(temps) > 0 {
				break
			}
			if round > 0 {
				if h, _, err := readSnapshot(dir, "prod"); err == nil && h.Node == "crasher" && len(temps) > 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("the writer never got that far: %s", out.String())
			}
			time.Sleep(time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		h, instances, err := readSnapshot(dir, "prod")
		if err != nil {
			t.Fatalf("round %d: after a crash mid-write the snapshot does not read: %v", round, err)
		}
		if want := map[string]int{"old": 10, "crasher": 8000}[h.Node]; want == 0 || len(instances) != want {
			t.Fatalf("round %d: snapshot by %q with %d instances", round, h.Node, len(instances))
		}
		t.Logf("round %d: the snapshot on disk is %q's (%d instances)", round, h.Node, len(instances))
	}
}

// crashWriter is the child of the crash test: it writes an 8,000-instance
// snapshot until it is killed.
func crashWriter(dir string) {
	clock := registrytest.NewClock()
	cfg := registry.DefaultConfig()
	cfg.Now = clock.Now
	r, _ := registry.New(cfg)
	for i := 0; i < 8000; i++ {
		_, _ = r.Apply(registry.RegisterOp(registrytest.NewInstance(fmt.Sprintf("APP-%d", i%50), fmt.Sprintf("i-%d", i))))
	}
	snap := r.Snapshot()
	for {
		if _, err := persist.Write(dir, "prod", "crasher", snap, nil, clock.Now()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func trailerFor(content string) string {
	sum := crc32.Checksum([]byte(content), crc32.MakeTable(crc32.Castagnoli))
	return fmt.Sprintf("crc32c: %08x bytes: %d\n", sum, len(content))
}

// BenchmarkWrite is the cost of one snapshot write of 10,000 and 100,000
// instances
// (encode, checksum, fsync, rename), its size, and one Read (verify and
// decode) of it.
func BenchmarkWrite(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cfg := registry.DefaultConfig()
			r, err := registry.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				in := registrytest.NewInstance(fmt.Sprintf("APP-%d", i%200), fmt.Sprintf("i-%d", i),
					registrytest.WithMetadata(map[string]string{"zone": "z" + strconv.Itoa(i%3)}))
				if _, err := r.Apply(registry.RegisterOp(in)); err != nil {
					b.Fatal(err)
				}
			}
			snap, dir := r.Snapshot(), b.TempDir()
			var info persist.Info
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if info, err = persist.Write(dir, "bench", "node", snap, nil, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(info.Bytes), "bytes/write")
			b.StopTimer()
			start := time.Now()
			if _, _, err := readSnapshot(dir, "bench"); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds()), "read-ms")
		})
	}
}

// Write versions survive the snapshot, so after a full restart the winner
// rule still knows which copy is newer; a file without them (written
// before versions existed) loads with version 0.
func TestWriteRead_keepsWriteVersions(t *testing.T) {
	clock := registrytest.NewClock()
	src := newRegistry(t, clock)
	fill(t, src, 20)
	clock.Advance(time.Second)
	if _, err := src.Apply(registry.RegisterOp(registrytest.NewInstance("APP-1", "i-1"))); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := persist.Write(dir, "prod", "node-a", src.Snapshot(), nil, clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, instances, err := readSnapshot(dir, "prod")
	if err != nil {
		t.Fatal(err)
	}
	dst := newRegistry(t, clock)
	if stored, refused := persist.Restore(dst, instances); stored != 20 || len(refused) != 0 {
		t.Fatalf("restored %d, refused %v", stored, refused)
	}
	if dst.RootDigest() != src.RootDigest() {
		t.Fatal("restored registry's digest differs: versions lost")
	}

	// The same file without its versions section, checksum redone.
	data, err := os.ReadFile(persist.Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(data, []byte("\nversions\n")) + 1
	content := append([]byte{}, data[:start]...)
	old := append(content, fmt.Sprintf("crc32c: %08x bytes: %d\n", crc32.Checksum(content, crc32.MakeTable(crc32.Castagnoli)), len(content))...)
	if err := os.WriteFile(persist.Path(dir), old, 0o600); err != nil {
		t.Fatal(err)
	}
	_, instances, err = readSnapshot(dir, "prod")
	if err != nil {
		t.Fatalf("a snapshot without versions: %v", err)
	}
	if len(instances) != 20 || instances[0].WriteVersion != 0 {
		t.Fatalf("%d instances, version %d", len(instances), instances[0].WriteVersion)
	}
}

// Refused snapshots are kept side by side, named by the time they were
// refused (UTC), the newest RefusedKept of them; a second refusal in the
// same instant does not overwrite the first.
func TestSetAside_keepsTheNewestRefused(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	refuse := func(content string, at time.Time) string {
		t.Helper()
		if err := os.WriteFile(persist.Path(dir), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		to, err := persist.SetAside(dir, at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(persist.Path(dir)); !os.IsNotExist(err) {
			t.Fatalf("the refused snapshot is still in place: %v", err)
		}
		return to
	}
	first := refuse("first", t0)
	if want := persist.Path(dir) + ".refused-20261205T110000.000000000Z"; first != want {
		t.Fatalf("set aside as %s, want %s", first, want)
	}
	if again := refuse("same instant", t0); again == first {
		t.Fatal("a second refusal in the same instant overwrote the first")
	}
	for i := 1; i <= 6; i++ {
		refuse(fmt.Sprintf("refusal %d", i), t0.Add(time.Duration(i)*time.Minute))
	}
	kept, err := persist.Refused(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != persist.RefusedKept {
		t.Fatalf("kept %d refused snapshots, want %d: %v", len(kept), persist.RefusedKept, kept)
	}
	for i, path := range kept { // oldest first: refusals 2 to 6
		b, err := os.ReadFile(path)
		if want := fmt.Sprintf("refusal %d", i+2); err != nil || string(b) != want {
			t.Fatalf("kept[%d] = %s holds %q (%v), want %q", i, path, b, err, want)
		}
	}
}

// readSnapshot is persist.ReadFile without the tombstones.
func readSnapshot(dir, cluster string) (persist.Header, []*registry.Instance, error) {
	f, err := persist.ReadFile(dir, cluster)
	return f.Header, f.Instances, err
}
