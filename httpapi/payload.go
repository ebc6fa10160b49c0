package httpapi

import (
	"bytes"
	"compress/gzip"
	"sync"

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
}

// payloadEntry is one encoded payload. ready is closed once body is set;
// readers that find an entry being built wait for it instead of encoding
// the same bytes again.
type payloadEntry struct {
	generation uint64
	ready      chan struct{}
	body       []byte
}

// payloadCache holds encoded payloads for the current registry version:
// each (kind, name, format, gzip) is encoded at most once per version and
// shared by every reader (ARCHITECTURE.md decision 4). Entries of older
// versions are replaced when next asked for and swept when the cache grows,
// so its size stays bounded by the apps and VIPs that exist (unlike
// Eureka's read-only cache, which keeps every key forever, bug 9).
type payloadCache struct {
	maxEntries int

	// mu guards entries.
	mu      sync.Mutex
	entries map[payloadKey]*payloadEntry

	builds uint64 // encodings done, for tests and metrics; guarded by mu
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

// get returns the payload for key at snap, encoding it with build if no
// reader has yet. A gzip key is built by compressing the plain payload of
// the same key, which is cached too.
func (pc *payloadCache) get(key payloadKey, snap *registry.Snapshot, build func() []byte) []byte {
	gen := generationOf(key.kind, snap)
	pc.mu.Lock()
	if e, ok := pc.entries[key]; ok && e.generation >= gen {
		pc.mu.Unlock()
		if e.generation > gen {
			// A reader holding an older snapshot came late; serve it
			// without displacing the newer entry.
			return encodeUncached(key, build)
		}
		<-e.ready
		return e.body
	}
	e := &payloadEntry{generation: gen, ready: make(chan struct{})}
	if len(pc.entries) >= pc.maxEntries {
		pc.sweepLocked(snap)
	}
	pc.entries[key] = e
	pc.builds++
	pc.mu.Unlock()

	defer close(e.ready)
	if key.gzip {
		plainKey := key
		plainKey.gzip = false
		e.body = gzipBytes(pc.get(plainKey, snap, build))
	} else {
		e.body = build()
	}
	return e.body
}

func encodeUncached(key payloadKey, build func() []byte) []byte {
	if key.gzip {
		return gzipBytes(build())
	}
	return build()
}

// sweepLocked drops entries of older versions, and if that is not enough,
// everything: a cache this full is being probed with random names.
func (pc *payloadCache) sweepLocked(snap *registry.Snapshot) {
	for k, e := range pc.entries {
		if e.generation != generationOf(k.kind, snap) {
			delete(pc.entries, k)
		}
	}
	if len(pc.entries) >= pc.maxEntries {
		clear(pc.entries)
	}
}

// buildCount returns how many payloads were encoded so far.
func (pc *payloadCache) buildCount() uint64 {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.builds
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// gzipBytes compresses b. BestSpeed: the payload is compressed once per
// version and a 100k-instance registry must rebuild well within a second;
// the default level costs several times the CPU for ~15 % fewer bytes.
func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b)/8 + 64)
	w := gzipWriters.Get().(*gzip.Writer)
	w.Reset(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	gzipWriters.Put(w)
	return buf.Bytes()
}
