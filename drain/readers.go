package drain

import (
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Reader names one reader of the registry on one node: who it says it is
// and where it reads from. Its fields are taken from a request as they
// are (no string is built on the read path); Client composes the name a
// receipt shows.
type Reader struct {
	// IdentityName, IdentityVersion and IdentityID are Eureka's identity
	// headers (DiscoveryIdentity-Name, -Version, -Id), as the Java
	// client's EurekaIdentityHeaderFilter sends them.
	IdentityName, IdentityVersion, IdentityID string
	// User is the authenticated user, when no identity headers came.
	User string
	// Agent is the User-Agent, when neither came.
	Agent string
	// Address is the reader's remote IP.
	Address string
	// Resolver is, for a DNS query, the resolver that asked: its address is
	// its identity (kept as netip.Addr: a query builds no string).
	Resolver netip.Addr
}

// MaxFieldLen is the longest identity field a reader keeps (bytes); the
// read path cuts longer ones (Clip), so a reader costs a bounded amount of
// memory whatever headers a client sends.
const MaxFieldLen = 200

// Clip cuts s to MaxFieldLen bytes, without copying.
func Clip(s string) string {
	if len(s) > MaxFieldLen {
		return s[:MaxFieldLen]
	}
	return s
}

// clipped is r with every field cut to MaxFieldLen (no copy).
func (r Reader) clipped() Reader {
	r.IdentityName, r.IdentityVersion, r.IdentityID = Clip(r.IdentityName), Clip(r.IdentityVersion), Clip(r.IdentityID)
	r.User, r.Agent, r.Address = Clip(r.User), Clip(r.Agent), Clip(r.Address)
	return r
}

// owned is r with its strings copied: a reader the table keeps must not
// hold on to the request it came from.
func (r Reader) owned() Reader {
	r.IdentityName, r.IdentityVersion, r.IdentityID = strings.Clone(r.IdentityName), strings.Clone(r.IdentityVersion), strings.Clone(r.IdentityID)
	r.User, r.Agent, r.Address = strings.Clone(r.User), strings.Clone(r.Agent), strings.Clone(r.Address)
	return r
}

// address is the address a receipt shows.
func (r Reader) address() string {
	if r.Resolver.IsValid() {
		return r.Resolver.String()
	}
	return r.Address
}

// Client is the identity a receipt names: the Eureka identity headers if
// sent, else the user, else the User-Agent.
func (r Reader) Client() string {
	switch {
	case r.IdentityName != "":
		s := r.IdentityName
		if r.IdentityVersion != "" {
			s += "/" + r.IdentityVersion
		}
		if r.IdentityID != "" {
			s += " (" + r.IdentityID + ")"
		}
		return s
	case r.User != "":
		return "user " + r.User
	case r.Agent != "":
		return r.Agent
	case r.Resolver.IsValid():
		return "DNS resolver"
	}
	return "(anonymous)"
}

// DefaultMaxReaders is the default cap of the readers a node tracks.
const DefaultMaxReaders = 10_000

// Readers is the table of the readers of one node: who read which app,
// when, and at which registry version. It is written on every read of the
// registry, so a read that finds its reader takes a read lock and stores
// a few atomics: no allocation, no lock that two readers contend for.
//
// It holds at most max readers. When a new reader finds it full, the
// readers idle for longer than the window go; if that frees nothing, the
// new reader is not tracked (Untracked counts its reads) and a drain's
// receipt says so: it cannot wait for a reader it does not know.
type Readers struct {
	window time.Duration
	max    int

	mu        sync.RWMutex
	byReader  map[Reader]*reads
	untracked atomic.Uint64
}

// reads is one reader's record: its last read of every app (a full fetch
// or a delta) and its last read of single apps (an app or VIP read, a
// watch event, a DNS answer, an xDS version).
type reads struct {
	all progress

	mu   sync.RWMutex
	apps map[string]*progress
}

// progress is a last read: when (Unix ms) and at which registry version.
type progress struct {
	at      atomic.Int64
	version atomic.Uint64
}

func (p *progress) note(at int64, version uint64) {
	p.at.Store(at)
	for {
		v := p.version.Load()
		if version <= v || p.version.CompareAndSwap(v, version) {
			return
		}
	}
}

// NewReaders returns an empty table of at most max readers (0: the
// default); window is how long a reader idle may be dropped to make room.
func NewReaders(max int, window time.Duration) *Readers {
	if max <= 0 {
		max = DefaultMaxReaders
	}
	return &Readers{window: window, max: max, byReader: map[Reader]*reads{}}
}

// NoteAll records that r read every app at version (a full fetch, a
// delta) at now.
func (t *Readers) NoteAll(r Reader, version uint64, now time.Time) {
	if t == nil {
		return
	}
	if rd := t.find(r, now); rd != nil {
		rd.all.note(now.UnixMilli(), version)
	}
}

// NoteApp records that r read app (its name in upper case, as the
// registry keeps it) at version at now.
func (t *Readers) NoteApp(r Reader, app string, version uint64, now time.Time) {
	if t == nil {
		return
	}
	rd := t.find(r, now)
	if rd == nil {
		return
	}
	rd.mu.RLock()
	p := rd.apps[app]
	rd.mu.RUnlock()
	if p == nil {
		rd.mu.Lock()
		if p = rd.apps[app]; p == nil {
			if rd.apps == nil {
				rd.apps = map[string]*progress{}
			}
			p = &progress{}
			rd.apps[app] = p
		}
		rd.mu.Unlock()
	}
	p.note(now.UnixMilli(), version)
}

// find returns r's record, adding it when there is room.
func (t *Readers) find(r Reader, now time.Time) *reads {
	r = r.clipped()
	t.mu.RLock()
	rd := t.byReader[r]
	t.mu.RUnlock()
	if rd != nil {
		return rd
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if rd = t.byReader[r]; rd != nil {
		return rd
	}
	if len(t.byReader) >= t.max {
		t.sweepLocked(now)
		if len(t.byReader) >= t.max {
			t.untracked.Add(1)
			return nil
		}
	}
	rd = &reads{}
	t.byReader[r.owned()] = rd
	return rd
}

// Forget drops r from the table: it is gone (it cancelled its own
// instance), so a drain does not wait for it to read again. It is added
// back if it reads again.
func (t *Readers) Forget(r Reader) {
	if t == nil {
		return
	}
	r = r.clipped()
	t.mu.Lock()
	delete(t.byReader, r)
	t.mu.Unlock()
}

// sweepLocked drops the readers idle for longer than the window.
func (t *Readers) sweepLocked(now time.Time) {
	cutoff := now.Add(-t.window).UnixMilli()
	for r, rd := range t.byReader {
		if rd.last() < cutoff {
			delete(t.byReader, r)
		}
	}
}

// last is when the reader last read anything.
func (rd *reads) last() int64 {
	at := rd.all.at.Load()
	rd.mu.RLock()
	defer rd.mu.RUnlock()
	for _, p := range rd.apps {
		at = max(at, p.at.Load())
	}
	return at
}

// of is the reader's last read of app: when, and the highest version.
func (rd *reads) of(app string) (at int64, version uint64) {
	at, version = rd.all.at.Load(), rd.all.version.Load()
	rd.mu.RLock()
	p := rd.apps[app]
	rd.mu.RUnlock()
	if p != nil {
		at, version = max(at, p.at.Load()), max(version, p.version.Load())
	}
	return at, version
}

// ReaderState is one reader of an app as a drain sees it on one node.
type ReaderState struct {
	Client   string `json:"client"`
	Address  string `json:"address"`
	LastRead int64  `json:"lastRead"` // ms since epoch
	// Confirmed is true when the reader read the app at or past the
	// version at which this node applied the drain.
	Confirmed bool `json:"confirmed"`
}

// Of lists the readers of app that read it at or after since (ms since
// epoch), each confirmed when it read at version seq or later (seq 0:
// the drain is not applied here yet, so none is).
func (t *Readers) Of(app string, since int64, seq uint64) []ReaderState {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []ReaderState
	for r, rd := range t.byReader {
		at, version := rd.of(app)
		if at == 0 || at < since {
			continue
		}
		out = append(out, ReaderState{Client: r.Client(), Address: r.address(), LastRead: at, Confirmed: seq != 0 && version >= seq})
	}
	return out
}

// Untracked is how many reads found the table full.
func (t *Readers) Untracked() uint64 { return t.untracked.Load() }

// Len is the number of readers tracked.
func (t *Readers) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byReader)
}
