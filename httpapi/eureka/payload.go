package eureka

import (
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"

	"github.com/muster-registry/muster/registry"
)

// payloadKind names what a cached payload holds.
type payloadKind uint8

const (
	payloadFull payloadKind = iota
	payloadDelta
	payloadApp
	payloadVIP
	payloadSVIP
)

// payloadFormat is the encoding of a payload.
type payloadFormat uint8

const (
	formatJSON payloadFormat = iota
	formatXML
)

type payloadKey struct {
	kind   payloadKind
	name   string // app or VIP name; "" for full and delta
	format payloadFormat
	gzip   bool
	// compact is Eureka's compact form (X-Eureka-Accept: compact), kept
	// apart from the full one as the Java server's ResponseCacheImpl keys
	// it (Key's EurekaAccept).
	compact bool
}

// payloadEntry holds the newest finished payload of one key and the build
// in flight, if any.
type payloadEntry struct {
	gen  uint64  // generation of body
	body payload // not ready until the first build finishes

	building bool
	buildGen uint64        // generation being built
	done     chan struct{} // closed when that build finishes
	waiters  int           // readers waiting for it
}

// payloadCache holds encoded payloads: each (kind, name, format, gzip) is
// encoded at most once per registry version and shared by every reader
// (ARCHITECTURE.md decision 4), and at most one build per key runs at a
// time, so a burst of readers after a change costs one encoding, not one
// each. A reader never gets a payload older than its snapshot, with one
// exception: a delta reader that waited for a build already in flight takes
// that build's result even if its own snapshot is a little newer. Under
// churn every delta request would otherwise meet a new version and start
// its own build; a delta that is one build behind is harmless, since the
// next poll carries the change and its hashcode is consistent with its own
// content. Entries of old versions are replaced when next asked for and
// swept when the cache grows, so its size stays bounded by the apps and
// VIPs that exist (unlike Eureka's read-only cache, which keeps every key
// forever, bug 9).
type payloadCache struct {
	maxEntries int

	// mu guards entries and builds.
	mu      sync.Mutex
	entries map[payloadKey]*payloadEntry
	builds  uint64 // encodings done, for tests and metrics
}

const defaultPayloadCacheEntries = 4096

func newPayloadCache(maxEntries int) *payloadCache {
	return &payloadCache{maxEntries: maxEntries, entries: map[payloadKey]*payloadEntry{}}
}

// generationOf is the snapshot counter a payload of kind depends on: the
// delta changes when old changes are pruned, everything else only with the
// content version.
func generationOf(kind payloadKind, snap *registry.Snapshot) uint64 {
	if kind == payloadDelta {
		return snap.DeltaVersion
	}
	return snap.Version
}

// get returns the payload of key for snap, building it with build when no
// finished or in-flight build serves.
func (pc *payloadCache) get(key payloadKey, snap *registry.Snapshot, build func() payload) payload {
	gen := generationOf(key.kind, snap)
	pc.mu.Lock()
	e := pc.entries[key]
	if e == nil {
		if len(pc.entries) >= pc.maxEntries {
			pc.sweepLocked(snap)
		}
		e = &payloadEntry{}
		pc.entries[key] = e
	}
	for {
		if e.body.ready() && e.gen >= gen {
			body := e.body
			pc.mu.Unlock()
			return body
		}
		if !e.building {
			return pc.buildLocked(e, gen, build)
		}
		done, waitedFor := e.done, e.buildGen
		e.waiters++
		pc.mu.Unlock()
		<-done
		pc.mu.Lock()
		e.waiters--
		if key.kind == payloadDelta && e.body.ready() && e.gen >= waitedFor {
			body := e.body
			pc.mu.Unlock()
			return body
		}
	}
}

// buildLocked runs build for gen outside the lock and publishes the result.
func (pc *payloadCache) buildLocked(e *payloadEntry, gen uint64, build func() payload) (body payload) {
	e.building, e.buildGen, e.done = true, gen, make(chan struct{})
	done := e.done
	pc.builds++
	pc.mu.Unlock()
	defer func() {
		pc.mu.Lock()
		if body.ready() && (!e.body.ready() || gen > e.gen) {
			e.gen, e.body = gen, body
		}
		e.building = false
		close(done)
		pc.mu.Unlock()
	}()
	return build()
}

// sweepLocked drops entries of older versions, and if that is not enough,
// every idle one: a cache this full is being probed with random names.
func (pc *payloadCache) sweepLocked(snap *registry.Snapshot) {
	for k, e := range pc.entries {
		if !e.building && e.gen != generationOf(k.kind, snap) {
			delete(pc.entries, k)
		}
	}
	if len(pc.entries) >= pc.maxEntries {
		for k, e := range pc.entries {
			if !e.building {
				delete(pc.entries, k)
			}
		}
	}
}

// buildCount returns how many payloads were assembled so far.
func (pc *payloadCache) buildCount() uint64 {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.builds
}

// payload is an encoded response body kept as the parts it is assembled
// from, written one after the other: the pieces are shared between
// versions and never copied into one buffer per version.
type payload struct {
	parts [][]byte
	size  int
	// version is, for a delta, the registry version (Snapshot.Version)
	// it was built at; 0 for other kinds.
	version uint64
}

func bytesPayload(b []byte) payload { return payload{parts: [][]byte{b}, size: len(b)} }

func partsPayload(parts [][]byte) payload {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return payload{parts: parts, size: n}
}

func (p payload) ready() bool { return p.parts != nil }

// gzipWriters reuses compressors for responses compressed as they are sent
// (the console): each holds ~1 MB of state. BestSpeed: higher levels cost
// several times the CPU for ~15 % fewer bytes. klauspost/compress's gzip is
// wire compatible with compress/gzip and about twice as fast. Registry
// payloads are compressed in pieces instead (pieces.go).
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return w
}}
