package persist

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// FileName is the snapshot's name inside the data directory.
const FileName = "registry.snapshot"

const (
	magic         = "MUSTER-REGISTRY-SNAPSHOT"
	formatVersion = 1
	tempPattern   = FileName + ".tmp-*"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors Read wraps, so callers (and metrics) can tell the reasons apart.
var (
	// ErrNotFound: there is no snapshot (a new data directory).
	ErrNotFound = errors.New("no snapshot")
	// ErrCorrupt: the file is truncated, altered or not a snapshot.
	ErrCorrupt = errors.New("corrupt snapshot")
	// ErrForeign: the snapshot was written by another cluster.
	ErrForeign = errors.New("snapshot of another cluster")
	// ErrVersion: the snapshot has a format this build does not read.
	ErrVersion = errors.New("unsupported snapshot format")
)

// Header is what a snapshot says about itself.
type Header struct {
	Cluster   string
	Node      string
	Written   time.Time
	Instances int
}

// Info describes a written snapshot.
type Info struct {
	Path       string
	Bytes      int64
	Instances  int
	Tombstones int
	Version    uint64 // the registry version written
}

// File is a whole snapshot as ReadFile returns it.
type File struct {
	Header
	Instances []*registry.Instance
	// Tombstones are the cancels the writer still kept, each with its
	// remaining lifetime at Header.Written; none in a file written
	// before tombstones were kept.
	Tombstones []registry.TombstoneEntry
}

// Path is the snapshot file of a data directory.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Write stores snap in dir atomically (temp file, fsync, rename, directory
// fsync). cluster names the cluster (muster.cluster-name); node is written
// for the operator's benefit only.
// tombs are the registry's live tombstones (Registry.LiveTombstones), kept
// in the file with their remaining lifetime; nil for none.
func Write(dir, cluster, node string, snap *registry.Snapshot, tombs []registry.TombstoneEntry, now time.Time) (Info, error) {
	if err := validName("cluster", cluster); err != nil {
		return Info{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Info{}, fmt.Errorf("snapshot: data directory %s: %w", dir, err)
	}
	removeStaleTemps(dir)
	tmp, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot: create temporary file in %s: %w", dir, err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()

	sum := crc32.New(castagnoli)
	counter := &countingWriter{}
	bw := bufio.NewWriterSize(tmp, 256<<10)
	body := io.MultiWriter(bw, sum, counter)
	if _, err := fmt.Fprintf(body, "%s %d\ncluster: %s\nnode: %s\nwritten: %s\ninstances: %d\n\n",
		magic, formatVersion, cluster, oneLine(node), now.UTC().Format(time.RFC3339Nano), snap.Instances); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	apps, hashcode := withoutMarks(snap)
	if err := wire.WriteApplicationsJSON(body, apps, strconv.FormatUint(snap.Version, 10), hashcode); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	if _, err := io.WriteString(body, "\n"); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	if err := writeVersions(body, snap); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	if err := writeTombstones(body, tombs); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	trailer := fmt.Sprintf("crc32c: %08x bytes: %d\n", sum.Sum32(), counter.n)
	if _, err := io.WriteString(bw, trailer); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	if err := bw.Flush(); err != nil {
		return Info{}, fmt.Errorf("snapshot: write %s: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return Info{}, fmt.Errorf("snapshot: fsync %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return Info{}, fmt.Errorf("snapshot: close %s: %w", tmpName, err)
	}
	final := Path(dir)
	if err := os.Rename(tmpName, final); err != nil {
		return Info{}, fmt.Errorf("snapshot: rename %s to %s: %w", tmpName, final, err)
	}
	committed = true
	if err := syncDir(dir); err != nil {
		return Info{}, fmt.Errorf("snapshot: fsync directory %s: %w", dir, err)
	}
	return Info{Path: final, Bytes: counter.n + int64(len(trailer)), Instances: snap.Instances, Tombstones: len(tombs), Version: snap.Version}, nil
}

// CheckDir makes sure dir exists (creating it) and that a file can be
// created in it, so a bad muster.data-dir stops start-up instead of
// failing every write later.
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// RefusedKept is how many refused snapshots SetAside keeps in the data
// dir: the newest, older ones are removed.
const RefusedKept = 5

// refusedPrefix starts the name of a refused snapshot; the time it was
// refused follows (refusedTimeLayout, UTC), so names sort by time.
const (
	refusedPrefix     = FileName + ".refused-"
	refusedTimeLayout = "20060102T150405.000000000Z"
)

// SetAside renames a refused snapshot to registry.snapshot.refused-<time>
// (UTC, to the nanosecond, so the names sort by time), beside the ones
// refused before, so the next write does not destroy what an operator may
// want to inspect or recover (say, after a wrong muster.cluster-name), and
// a second refusal does not destroy the first. Only the newest RefusedKept
// are kept. It returns the new path.
func SetAside(dir string, now time.Time) (string, error) {
	base := filepath.Join(dir, refusedPrefix+now.UTC().Format(refusedTimeLayout))
	to := base
	for i := 2; ; i++ { // two refusals in one nanosecond (a test's clock)
		if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(Path(dir), to); err != nil {
		return "", err
	}
	if err := pruneRefused(dir); err != nil {
		return to, err
	}
	return to, syncDir(dir)
}

// Refused lists the refused snapshots kept in dir, oldest first.
func Refused(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), refusedPrefix) && e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out) // the names carry the time, fixed width
	return out, nil
}

// pruneRefused removes all but the newest RefusedKept refused snapshots.
func pruneRefused(dir string) error {
	all, err := Refused(dir)
	if err != nil {
		return err
	}
	for len(all) > RefusedKept {
		if err := os.Remove(all[0]); err != nil {
			return err
		}
		all = all[1:]
	}
	return nil
}

// ReadFile loads and verifies the snapshot of dir, its instances and its
// tombstones. Nothing is returned unless the whole file is sound and was
// written by cluster. Errors wrap ErrNotFound, ErrCorrupt, ErrForeign or
// ErrVersion and name the file.
func ReadFile(dir, cluster string) (File, error) {
	path := Path(dir)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return File{}, fmt.Errorf("%s: %w", path, ErrNotFound)
	}
	if err != nil {
		return File{}, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	f, err := parse(data, cluster)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

func parse(data []byte, cluster string) (File, error) {
	h, instances, tombs, err := parseParts(data, cluster)
	if err != nil {
		return File{}, err
	}
	return File{Header: h, Instances: instances, Tombstones: tombs}, nil
}

func parseParts(data []byte, cluster string) (h Header, _ []*registry.Instance, _ []registry.TombstoneEntry, _ error) {
	first, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(first, []byte(magic+" ")) {
		return h, nil, nil, fmt.Errorf("%w: does not start with %q", ErrCorrupt, magic)
	}
	if v := string(first[len(magic)+1:]); v != strconv.Itoa(formatVersion) {
		return h, nil, nil, fmt.Errorf("%w: format %q, this build reads %d", ErrVersion, v, formatVersion)
	}
	// The trailer is the last line; everything before it is checksummed.
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return h, nil, nil, fmt.Errorf("%w: truncated (no complete trailer line)", ErrCorrupt)
	}
	cut := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	content, trailer := data[:cut], string(data[cut:len(data)-1])
	var wantSum uint32
	var wantLen int64
	if _, err := fmt.Sscanf(trailer, "crc32c: %08x bytes: %d", &wantSum, &wantLen); err != nil {
		return h, nil, nil, fmt.Errorf("%w: truncated or damaged trailer", ErrCorrupt)
	}
	if int64(len(content)) != wantLen {
		return h, nil, nil, fmt.Errorf("%w: %d bytes before the trailer, the trailer says %d", ErrCorrupt, len(content), wantLen)
	}
	if got := crc32.Checksum(content, castagnoli); got != wantSum {
		return h, nil, nil, fmt.Errorf("%w: checksum %08x, the trailer says %08x", ErrCorrupt, got, wantSum)
	}

	head, body, ok := bytes.Cut(content, []byte("\n\n"))
	if !ok {
		return h, nil, nil, fmt.Errorf("%w: no blank line after the header", ErrCorrupt)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(head), "\n")[1:] {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			return h, nil, nil, fmt.Errorf("%w: header line %q", ErrCorrupt, line)
		}
		fields[k] = v
	}
	h.Cluster, h.Node = fields["cluster"], fields["node"]
	if h.Cluster != cluster {
		return h, nil, nil, fmt.Errorf("%w: written by cluster %q, this node is in %q (muster.cluster-name)", ErrForeign, h.Cluster, cluster)
	}
	var err error
	if h.Written, err = time.Parse(time.RFC3339Nano, fields["written"]); err != nil {
		return h, nil, nil, fmt.Errorf("%w: header written: %v", ErrCorrupt, err)
	}
	if h.Instances, err = strconv.Atoi(fields["instances"]); err != nil || h.Instances < 0 {
		return h, nil, nil, fmt.Errorf("%w: header instances %q", ErrCorrupt, fields["instances"])
	}
	body, tail, err := cutVersions(body)
	if err != nil {
		return h, nil, nil, err
	}
	versions, tombs, err := parseTail(tail)
	if err != nil {
		return h, nil, nil, err
	}
	apps, err := wire.DecodeApplicationsJSON(bytes.TrimSuffix(body, []byte("\n")))
	if err != nil {
		return h, nil, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	instances := make([]*registry.Instance, 0, h.Instances)
	for _, app := range apps.Apps {
		for _, iv := range app.Instances {
			if err := iv.Instance.Validate(); err != nil {
				return h, nil, nil, fmt.Errorf("%w: instance %s/%s: %v", ErrCorrupt, app.Name, iv.ID(), err)
			}
			iv.Instance.WriteVersion = versions[registry.InstanceKey{App: app.Name, ID: iv.ID()}]
			instances = append(instances, iv.Instance)
		}
	}
	if len(instances) != h.Instances {
		return h, nil, nil, fmt.Errorf("%w: %d instances, the header says %d", ErrCorrupt, len(instances), h.Instances)
	}
	return h, instances, tombs, nil
}

// Store is the part of the registry Restore needs.
type Store interface {
	BeginSync()
	Apply(registry.Op) (*registry.Instance, error)
	EndSync() int
}

// Restore applies instances read from a snapshot through the syncUp path
// (registers from OriginSync), so every lease counts as renewed now. It
// returns how many were stored; an instance the registry refuses is
// skipped (Read has validated them, so that is a registry rule such as a
// limit).
func Restore(st Store, instances []*registry.Instance) (stored int, refused []error) {
	st.BeginSync()
	defer st.EndSync()
	for _, in := range instances {
		got, err := st.Apply(registry.RegisterOp(in).From(registry.OriginSync))
		if err != nil {
			refused = append(refused, fmt.Errorf("%s/%s: %w", in.App, in.ID(), err))
			continue
		}
		if got != nil {
			stored++
		}
	}
	return stored, refused
}

// RestoreTombstones applies a snapshot's tombstones as versioned cancels
// from OriginSync, each kept for what was left of it at written less the
// time since (now, on the registry's clock): one whose lifetime ran out
// while the node was down is dropped. Applied after Restore, a tombstone
// removes a restored copy it is newer than, under the winner rule, and a
// syncUp or anti-entropy copy older than the cancel stays out. It returns
// how many were kept.
func RestoreTombstones(st Store, written time.Time, tombs []registry.TombstoneEntry, now time.Time) int {
	elapsed := max(now.Sub(written), 0)
	kept := 0
	for _, t := range tombs {
		ttl := t.TTL - elapsed
		if ttl <= 0 {
			continue
		}
		op := registry.CancelOp(t.Key.App, t.Key.ID).From(registry.OriginSync)
		op.Version, op.TombstoneTTL = t.Version, ttl
		if _, err := st.Apply(op); err == nil || errors.Is(err, registry.ErrInstanceNotFound) {
			kept++
		}
	}
	return kept
}

// ValidClusterName checks a muster.cluster-name value.
func ValidClusterName(name string) error { return validName("the cluster name", name) }

func validName(what, s string) error {
	if s == "" || strings.ContainsAny(s, "\r\n") || strings.TrimSpace(s) != s {
		return fmt.Errorf("%s must be a non-empty single line without surrounding spaces", what)
	}
	return nil
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func removeStaleTemps(dir string) {
	olds, _ := filepath.Glob(filepath.Join(dir, tempPattern))
	for _, f := range olds {
		os.Remove(f)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// withoutMarks is snap's apps with every instance the health checks
// marked, or that is drained, written as its client left it (its status
// without the marks): the file keeps no marks (Eureka's JSON has no place
// for them), and an instance restored as DOWN without its mark would stay
// DOWN, since only marked or UP instances are probed; one restored as
// OUT_OF_SERVICE without its drain could not be undrained. Restored
// unversioned (writeVersions), it takes a peer's marked or drained copy;
// a lone node forgets the drain, or probes the instance again.
func withoutMarks(snap *registry.Snapshot) ([]registry.AppView, string) {
	var apps []registry.AppView // a copy, once a mark is found
	for i, app := range snap.Apps {
		cloned := false
		for j, iv := range app.Instances {
			_, drained := iv.Drain()
			if iv.Health == nil && !drained {
				continue
			}
			if apps == nil {
				apps = slices.Clone(snap.Apps)
			}
			if !cloned { // snapshots share their instance arrays
				apps[i].Instances, cloned = slices.Clone(app.Instances), true
			}
			in := iv.Instance.Clone()
			in.Status, in.Health = iv.ClientStatus(), nil
			apps[i].Instances[j].Instance = in
		}
	}
	if apps == nil {
		return snap.Apps, snap.Hashcode
	}
	return apps, registry.HashcodeOf(apps)
}

// versionsMark starts the section after the registry's JSON that keeps
// the instances' write versions (registry.Instance.WriteVersion), which
// Eureka's JSON has no field for: one JSON array per line, ["APP","id",v].
// A file without it (written before versions existed) loads with version
// 0, which any versioned copy from a peer beats.
const versionsMark = "versions\n"

func writeVersions(w io.Writer, snap *registry.Snapshot) error {
	if _, err := io.WriteString(w, versionsMark); err != nil {
		return err
	}
	for _, app := range snap.Apps {
		for _, iv := range app.Instances {
			if iv.WriteVersion == 0 || iv.Health != nil || iv.Pieces != nil {
				// Neither the marks (withoutMarks) nor the other
				// pieces' versions (an override, metadata writes) are kept
				// on disk: without its version the restored copy loses to
				// the one a peer holds, and a lone node serves what it
				// showed before.
				continue
			}
			line, err := json.Marshal([]any{app.Name, iv.ID(), iv.WriteVersion})
			if err != nil {
				return err
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return err
			}
		}
	}
	return nil
}

// tombstonesMark starts the section after the versions that keeps the
// live tombstones (registry.LiveTombstones): one JSON array per line,
// ["APP","id",<cancel's write version>,<remaining lifetime in ms at the
// header's written time>]. A file without it (written before tombstones
// were kept) loads with none.
const tombstonesMark = "tombstones\n"

func writeTombstones(w io.Writer, tombs []registry.TombstoneEntry) error {
	if _, err := io.WriteString(w, tombstonesMark); err != nil {
		return err
	}
	for _, t := range tombs {
		line, err := json.Marshal([]any{t.Key.App, t.Key.ID, t.Version, t.TTL.Milliseconds()})
		if err != nil {
			return err
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// cutVersions splits the body into the registry's JSON and what follows
// it (the sections), if anything. The JSON is one line, so the sections
// start after its first newline.
func cutVersions(body []byte) ([]byte, []byte, error) {
	i := bytes.IndexByte(body, '\n')
	if i < 0 || !bytes.HasPrefix(body[i+1:], []byte(versionsMark)) {
		return body, nil, nil
	}
	return body[:i+1], body[i+1:], nil
}

// parseTail reads the sections after the JSON: versions, then
// tombstones, each optional only in that a file written before it
// existed ends before it. Any line that is not a well-formed row of its
// section refuses the whole file.
func parseTail(tail []byte) (map[registry.InstanceKey]uint64, []registry.TombstoneEntry, error) {
	if len(tail) == 0 {
		return nil, nil, nil
	}
	rest := tail[len(versionsMark):]
	var tombPart []byte
	hasTombs := false
	if bytes.HasPrefix(rest, []byte(tombstonesMark)) {
		rest, tombPart, hasTombs = nil, rest[len(tombstonesMark):], true
	} else if j := bytes.Index(rest, []byte("\n"+tombstonesMark)); j >= 0 {
		rest, tombPart, hasTombs = rest[:j+1], rest[j+1+len(tombstonesMark):], true
	}
	versions := map[registry.InstanceKey]uint64{}
	for _, line := range lines(rest) {
		if len(line) == 0 {
			continue
		}
		app, id, nums, err := parseRow(line, 1)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: versions line %q", ErrCorrupt, oneLine(string(line)))
		}
		versions[registry.InstanceKey{App: app, ID: id}] = nums[0]
	}
	if !hasTombs {
		return versions, nil, nil
	}
	var tombs []registry.TombstoneEntry
	for _, line := range lines(tombPart) {
		if len(line) == 0 {
			continue
		}
		app, id, nums, err := parseRow(line, 2)
		if err != nil || app == "" || id == "" || nums[0] == 0 || nums[1] > uint64(math.MaxInt64/time.Millisecond) {
			return nil, nil, fmt.Errorf("%w: tombstones line %q", ErrCorrupt, oneLine(string(line)))
		}
		tombs = append(tombs, registry.TombstoneEntry{
			Key:     registry.InstanceKey{App: app, ID: id},
			Version: nums[0],
			TTL:     time.Duration(nums[1]) * time.Millisecond,
		})
	}
	return versions, tombs, nil
}

func lines(b []byte) [][]byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(b, []byte("\n"))
}

// parseRow reads ["app","id",<n unsigned integers>].
func parseRow(line []byte, n int) (app, id string, nums []uint64, err error) {
	var row []any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&row); err != nil || len(row) != 2+n || dec.More() {
		return "", "", nil, errors.New("bad row")
	}
	app, ok1 := row[0].(string)
	id, ok2 := row[1].(string)
	if !ok1 || !ok2 {
		return "", "", nil, errors.New("bad row")
	}
	for _, x := range row[2:] {
		num, ok := x.(json.Number)
		v, err := strconv.ParseUint(string(num), 10, 64)
		if !ok || err != nil {
			return "", "", nil, errors.New("bad row")
		}
		nums = append(nums, v)
	}
	return app, id, nums, nil
}
