package eureka

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/muster-registry/muster/internal/gzjoin"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// Incremental payloads. A full registry, a delta and a VIP lookup are
// applications documents: a header (versions__delta, apps__hashcode), the
// apps, a footer. Each app is encoded once per content (registry.AppView's
// Name and Version) and kept as a piece: plain JSON, plain XML, and
// compressed pieces for gzip (raw DEFLATE ended by a sync flush, joined by
// gzjoin into one standard gzip member). A document after a change reuses
// the pieces of every app that did not change; only the changed app is
// encoded and compressed again, so the cost of the first read after a
// change follows the size of what changed, not of the registry.
//
// So that a response is a few large writes rather than thousands of small
// ones, pieces are joined into chunks of consecutive apps, each kept until
// one of its apps changes; a response is the header, the chunks and the
// footer, written one after the other and never copied into one buffer. A
// change inside an app costs its piece and one chunk; an app added or
// removed shifts the chunks after it, which are rejoined (copied, not
// encoded). How many apps a chunk joins (its span) follows the bytes of the
// pieces, so that chunks come near the store's chunkBytes in every format (see
// spanLocked).
//
// Bytes: the plain parts of a document are exactly what
// wire.AppendApplicationsJSON/XML write for the same snapshot. Compressed
// documents decode to those same bytes; the compressed bytes themselves
// differ from compressing the whole document at once, since each piece is
// compressed on its own, with the tail of the app before it as its
// dictionary (fewer bytes than the Java server's one stream: see
// docs/performance.md).

// Variants of an app's piece.
const (
	variantJSON        = iota // {"name":…,"instance":[…]}
	variantXML                // <application>…</application>
	variantJSONGzFirst        // variantJSON compressed, first in its document
	variantJSONGzNext         // ',' and variantJSON compressed
	variantXMLGz              // variantXML compressed
	numVariants
)

// defaultChunkBytes is the size chunks aim at (pieceStore.chunkBytes). Each chunk is one write (a large
// response is written in writes of up to 4 MiB, limits.go), and on
// loopback a write costs ~10 µs beyond its bytes: a 10k-instance delta in
// 7 chunks of ~120 KB cost the server 1.3–1.5× the CPU of the same bytes
// in one write, in 2 chunks about 1.0×. A change rejoins (copies) one
// chunk: 512 KiB is ~25 µs.
const defaultChunkBytes = 512 << 10

// maxSpan bounds the apps of a chunk (a registry of many tiny apps).
const maxSpan = 1 << 14

// spanState is what a document kind (registry or delta, and variant)
// learned of its pieces' size, to choose its chunks' span.
type spanState struct {
	span        int     // apps per chunk; 0 until the first document
	perInstance float64 // bytes per instance in the last document
}

// firstPerInstance are guesses of the bytes per instance of each variant
// (Spring-like instances), for the first document before any is measured.
var firstPerInstance = [numVariants]float64{
	variantJSON: 1200, variantXML: 1350, variantJSONGzNext: 80, variantXMLGz: 85,
}

// appPieces holds the encoded forms of one app content, each made at most
// once (sync.Once: readers that arrive together wait for one encoding).
//
// A compressed piece is compressed with a preset dictionary: the plain tail
// of the app before it in its document (dictTail), so that the first
// instances of an app compress as well as in one stream (without it every
// app starts from an empty window: 200 apps of 50 Spring instances cost
// ~20% more bytes than the Java server's one stream). Its DEFLATE so refers
// into the app before it and is only valid after an app with that same
// tail; gzDict records which tail (by hash) it was made for, and a piece
// whose predecessor's tail changed is compressed again (not encoded: its
// plain bytes are the same).
type appPieces struct {
	view registry.AppView
	// compact says which form the pieces hold: Eureka's compact one
	// (X-Eureka-Accept: compact, wire's *Compact* encoders) or the full one.
	compact bool
	once    [numVariants]sync.Once
	plain   [2][]byte
	// gzMu guards no field (see below): readers that arrive together wait
	// on it for one compression.
	gzMu sync.Mutex
	// gz, gzMade and gzDict are guarded by pieceStore.mu (a chunk may be
	// rebasing gz).
	gz     [3]gzjoin.Piece
	gzMade [3]bool
	gzDict [3]uint64
	// tail is the hash of dictTail, per format (JSON, XML), once known.
	tailOnce [2]sync.Once
	tail     [2]uint64
}

// dictTailInstances is how many of an app's last instances make the
// dictionary of the piece after it: a few carry every field name and the
// values an app's instances share; more adds little.
const dictTailInstances = 4

// dictTail returns a suffix of the app's plain piece (either variant: they
// differ only in a leading comma): its last few instances and the closing,
// encoded on their own. An app's encoding is its name, then each instance
// encoded independently of the others, then the closing, so the encoding of
// the last instances alone, less its name part, ends the whole one.
func dictTail(view registry.AppView, xml, compact bool) []byte {
	last := view
	last.Instances = view.Instances[max(len(view.Instances)-dictTailInstances, 0):]
	none := view
	none.Instances = nil
	closing := len("]}")
	if xml {
		closing = len("</application>")
	}
	b := appendPiece(nil, last, xml, compact)
	head := appendPiece(nil, none, xml, compact)
	return b[len(head)-closing:]
}

// appendPiece appends an app's plain piece in JSON or XML, in the full or
// the compact form. Both forms of a format end an app the same way, so
// dictTail and the chunks treat them alike.
func appendPiece(b []byte, view registry.AppView, xml, compact bool) []byte {
	switch {
	case xml && compact:
		return wire.AppendApplicationCompactXML(b, view)
	case xml:
		return wire.AppendApplicationXML(b, view)
	case compact:
		return wire.AppendApplicationBodyCompactJSON(b, view)
	default:
		return wire.AppendApplicationBodyJSON(b, view)
	}
}

var tailSeed = maphash.MakeSeed()

// tailHash returns the hash of the app's dictTail, computed once.
func (p *appPieces) tailHash(xml bool) uint64 {
	f := b2i(xml)
	p.tailOnce[f].Do(func() { p.tail[f] = maphash.Bytes(tailSeed, dictTail(p.view, xml, p.compact)) })
	return p.tail[f]
}

type pieceKey struct {
	delta   bool // a delta group rather than an app of the registry
	compact bool // the compact form
	name    string
}

// docKind is a kind of applications document whose pieces and chunks are
// kept apart: the registry's apps or the delta's groups, in the full or the
// compact form.
type docKind struct {
	delta, compact bool
}

// index numbers the kinds, for the per-kind arrays of pieceStore.
func (k docKind) index() int { return b2i(k.delta) | b2i(k.compact)<<1 }

const numDocKinds = 4

type chunkKey struct {
	kind    docKind
	variant int
	span    int // apps per chunk when it was joined
	index   int
}

type chunk struct {
	from  []*appPieces
	plain []byte
	gz    gzjoin.Piece
	// members says where each app's piece lies in plain or gz.Deflate,
	// until the chunk is stored and its pieces are pointed there.
	members []chunkMember
}

// chunkMember is one app's piece inside a chunk: variant v at [off, off+n).
type chunkMember struct {
	p      *appPieces
	v      int
	off, n int
}

// pieceStore holds the newest pieces of every app and delta group, and the
// chunks joined from them. A chunk is its pieces laid end to end, so once
// a chunk is stored its pieces are made slices of it (rebase) rather than
// kept twice: at 1M instances that is ~70 B an instance per cached
// format. mu also guards the pieces' slices from then on.
type pieceStore struct {
	mu     sync.Mutex
	pieces map[pieceKey]*appPieces
	chunks map[chunkKey]*chunk
	// runs are the compressed runs of small apps (runOf), by their first
	// app.
	runs map[runKey]*smallRun
	// last is the pieces of the latest document of each kind
	// (docKind.index), in order (ofAll).
	last [numDocKinds][]*appPieces
	// spans of the documents of each kind.
	spans [numDocKinds][numVariants]spanState
	// chunkBytes is the size chunks aim at: defaultChunkBytes, smaller in
	// tests that want several chunks of a few apps. Set before first use.
	chunkBytes int

	encodings atomic.Uint64 // pieces encoded, for metrics and tests
}

func newPieceStore() *pieceStore {
	return &pieceStore{pieces: map[pieceKey]*appPieces{}, chunks: map[chunkKey]*chunk{}, runs: map[runKey]*smallRun{},
		chunkBytes: defaultChunkBytes}
}

// of returns the pieces of view, kept while view is its app's newest
// content. A reader of an older snapshot gets pieces that are not kept.
func (ps *pieceStore) of(kind docKind, view registry.AppView) *appPieces {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.ofLocked(kind, view)
}

// ofAll is of for every app of a document, under one lock. An app at the
// same place with the same name and Version as in the previous document
// of its kind takes that document's pieces without a lookup: at 1M
// instances (20,000 apps) the lookups, each a few cache misses, cost
// ~20 ms a document, and after one change all but one app are where they
// were.
func (ps *pieceStore) ofAll(kind docKind, apps []registry.AppView) []*appPieces {
	pcs := make([]*appPieces, len(apps))
	ps.mu.Lock()
	defer ps.mu.Unlock()
	prev := ps.last[kind.index()]
	for i, a := range apps {
		if i < len(prev) && prev[i].view.Version == a.Version && prev[i].view.Name == a.Name {
			pcs[i] = prev[i]
			continue
		}
		pcs[i] = ps.ofLocked(kind, a)
	}
	ps.last[kind.index()] = pcs
	return pcs
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (ps *pieceStore) ofLocked(kind docKind, view registry.AppView) *appPieces {
	k := pieceKey{kind.delta, kind.compact, view.Name}
	p := ps.pieces[k]
	switch {
	case p == nil || p.view.Version < view.Version:
		p = &appPieces{view: view, compact: kind.compact}
		ps.pieces[k] = p
	case p.view.Version > view.Version:
		return &appPieces{view: view, compact: kind.compact}
	}
	return p
}

// sweep drops the pieces of apps and groups that are gone, and chunks past
// the end, once the store holds more than twice what snap needs.
func (ps *pieceStore) sweep(snap *registry.Snapshot) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.pieces) <= 4*(len(snap.Apps)+len(snap.Delta))+64 {
		return
	}
	live := make(map[pieceKey]bool, 2*(len(snap.Apps)+len(snap.Delta)))
	for _, compact := range []bool{false, true} {
		for _, a := range snap.Apps {
			live[pieceKey{false, compact, a.Name}] = true
		}
		for _, a := range snap.Delta {
			live[pieceKey{true, compact, a.Name}] = true
		}
	}
	for k := range ps.pieces {
		if !live[k] {
			delete(ps.pieces, k)
		}
	}
	for k := range ps.runs {
		if !live[pieceKey{k.kind.delta, k.kind.compact, k.first}] {
			delete(ps.runs, k)
		}
	}
	for k := range ps.chunks {
		n := len(snap.Apps)
		if k.kind.delta {
			n = len(snap.Delta)
		}
		if k.index*k.span >= n {
			delete(ps.chunks, k)
		}
	}
}

// plainOf returns the app's plain JSON (xml false) or XML piece.
func (ps *pieceStore) plainOf(p *appPieces, xml bool) []byte {
	v := variantJSON
	if xml {
		v = variantXML
	}
	p.once[v].Do(func() {
		ps.encodings.Add(1)
		p.plain[v] = appendPiece(nil, p.view, xml, p.compact)
	})
	ps.mu.Lock() // a chunk may be rebasing it
	defer ps.mu.Unlock()
	return p.plain[v]
}

var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// gzOf returns a compressed piece of the app (variantJSONGzFirst,
// variantJSONGzNext or variantXMLGz) for a place right after pred (nil:
// first in its document, after the header, without a dictionary). The
// plain form is encoded into a reused buffer when it is not kept already,
// so a gzip-only registry holds only compressed pieces.
func (ps *pieceStore) gzOf(p *appPieces, v int, pred *appPieces) gzjoin.Piece {
	xml := v == variantXMLGz
	i := v - variantJSONGzFirst
	var dict uint64
	if pred != nil {
		dict = pred.tailHash(xml)
	}
	p.gzMu.Lock()
	defer p.gzMu.Unlock()
	ps.mu.Lock()
	if p.gzMade[i] && p.gzDict[i] == dict {
		g := p.gz[i]
		ps.mu.Unlock()
		return g
	}
	encoded := p.gzMade[i] // compressed before, for another predecessor
	ps.mu.Unlock()
	if !encoded {
		ps.encodings.Add(1)
	}
	bp := encodeBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	if v == variantJSONGzNext {
		b = append(b, ',')
	}
	b = appendPiece(b, p.view, xml, p.compact)
	var tail []byte
	if pred != nil {
		tail = dictTail(pred.view, xml, p.compact)
	}
	g := gzjoin.CompressDict(b, tail)
	if cap(b) <= 4<<20 {
		*bp = b
		encodeBuffers.Put(bp)
	}
	ps.mu.Lock()
	p.gz[i], p.gzMade[i], p.gzDict[i] = g, true, dict
	ps.mu.Unlock()
	return g
}

// Small apps. A compressed piece is a DEFLATE block of its own, with its
// own Huffman tables (~60 bytes) and sync flush: nothing for a 50-instance
// app, but most of a one-instance delta group (a delta of 100 changes in
// 100 apps was 1.6× the Java server's bytes). Consecutive small apps are
// so compressed together, as a run: its boundaries follow the apps' names
// (a run ends after an app whose name hashes to 0 mod runBreak, or at
// maxRunInstances), so that an app added or removed changes only its own run.
// A run's apps keep their plain pieces (small by definition), so a change
// in one of them encodes only that one and compresses its run again.

// smallAppInstances is the most instances an app of a run has in a
// registry document, smallDeltaGroupInstances in a delta. A delta under
// churn spreads its changes over many apps (1 % of 10k instances a second
// for 10 s: ~5 per group), and groups of 5 to 8 compressed one by one paid
// their own tables: 74.7 B per changed instance (gzip JSON), 1.07× the
// Java server's; in runs 64.1 B. Registry apps stay at 4: a run's apps
// keep their plain pieces, which a registry of small apps would then hold
// for every instance, while a delta is small.
const (
	smallAppInstances        = 4
	smallDeltaGroupInstances = 8
)

// runBreak makes runs of ~64 apps on average (a delta of 100 one-instance
// groups in runs of ~8 was 1.06× the Java server's bytes, in runs of ~32
// 0.98×; 1000 groups in runs of ~32 1.01×, of ~64 0.99×); maxRunInstances
// bounds what a change in one of them compresses again (~250 KB of plain
// text, about 1 ms).
const (
	runBreak        = 64
	maxRunInstances = 200
)

var runSeed = maphash.MakeSeed()

func isSmallApp(kind docKind, p *appPieces) bool {
	limit := smallAppInstances
	if kind.delta {
		limit = smallDeltaGroupInstances
	}
	return len(p.view.Instances) <= limit
}

// endsRun reports whether a run ends after the app.
func endsRun(p *appPieces) bool { return maphash.String(runSeed, p.view.Name)%runBreak == 0 }

type runKey struct {
	kind    docKind
	variant int
	first   string // the run's first app
}

// smallRun is a run of small apps compressed as one piece, valid after an
// app with the dictionary tail dict.
type smallRun struct {
	from  []*appPieces
	first bool // first in its document (JSON: no leading comma)
	dict  uint64
	gz    gzjoin.Piece
}

// runEnd returns the end (exclusive) of the run of small apps starting at
// pcs[i] (pcs[i] small), not past end.
func runEnd(kind docKind, pcs []*appPieces, i, end int) int {
	j, instances := i, 0
	for j < end && isSmallApp(kind, pcs[j]) && instances+len(pcs[j].view.Instances) <= maxRunInstances {
		instances += len(pcs[j].view.Instances)
		j++
		if endsRun(pcs[j-1]) {
			break
		}
	}
	return max(j, i+1)
}

// runOf returns the compressed run of apps (small, consecutive) for a place
// right after pred (nil: first in the document), compressed again only when
// one of its apps or the tail before it changed.
func (ps *pieceStore) runOf(kind docKind, v int, apps []*appPieces, pred *appPieces) gzjoin.Piece {
	xml := v == variantXMLGz
	var dict uint64
	if pred != nil {
		dict = pred.tailHash(xml)
	}
	first := pred == nil
	k := runKey{kind, v, apps[0].view.Name}
	ps.mu.Lock()
	r := ps.runs[k]
	ps.mu.Unlock()
	if r != nil && r.dict == dict && r.first == first && slices.Equal(r.from, apps) {
		return r.gz
	}
	var plain []byte
	for i, p := range apps {
		if !xml && !(first && i == 0) {
			plain = append(plain, ',')
		}
		plain = append(plain, ps.plainOf(p, xml)...)
	}
	var tail []byte
	if pred != nil {
		tail = dictTail(pred.view, xml, kind.compact)
	}
	r = &smallRun{from: slices.Clone(apps), first: first, dict: dict, gz: gzjoin.CompressDict(plain, tail)}
	ps.mu.Lock()
	ps.runs[k] = r
	ps.mu.Unlock()
	return r.gz
}

// chunkOf returns chunk index of a document's apps (from), joined anew only
// when one of its apps changed.
func (ps *pieceStore) chunkOf(k chunkKey, from []*appPieces, join func() *chunk) *chunk {
	ps.mu.Lock()
	c := ps.chunks[k]
	ps.mu.Unlock()
	if c != nil && slices.Equal(c.from, from) {
		return c
	}
	c = join()
	c.from = slices.Clone(from)
	ps.mu.Lock()
	ps.chunks[k] = c
	ps.rebaseLocked(c)
	ps.mu.Unlock()
	return c
}

// rebaseLocked points the chunk's pieces at their bytes inside it, so the
// separate copies can go. Readers copy a piece's slice under mu, and the
// bytes at either place are the same, so one that read the old slice is
// not affected.
func (ps *pieceStore) rebaseLocked(c *chunk) {
	for _, m := range c.members {
		switch m.v {
		case variantJSON, variantXML:
			m.p.plain[m.v] = c.plain[m.off : m.off+m.n : m.off+m.n]
		default:
			m.p.gz[m.v-variantJSONGzFirst].Deflate = c.gz.Deflate[m.off : m.off+m.n : m.off+m.n]
		}
	}
	c.members = nil
}

// spanLocked returns how many apps each chunk of a document of apps joins,
// for variant v: near ps.chunkBytes at the bytes per instance of the last
// document of its kind (a guess for the first), in powers of two, kept
// while it is within 2× of that ideal so that a document does not rejoin
// every chunk for a small change in size. The chunks of an old span are
// dropped when it changes.
func (ps *pieceStore) spanLocked(kind docKind, v int, apps []registry.AppView) int {
	st := &ps.spans[kind.index()][v]
	per := st.perInstance
	if per == 0 {
		per = firstPerInstance[v]
		if kind.compact {
			per /= 3 // ~400 of ~1200 bytes a Spring instance are kept
		}
	}
	instances := 0
	for _, a := range apps {
		instances += len(a.Instances)
	}
	perApp := per * float64(max(instances, 1)) / float64(max(len(apps), 1))
	ideal := float64(ps.chunkBytes) / max(perApp, 1)
	if st.span > 0 && float64(st.span) >= ideal/2 && float64(st.span) <= ideal*2 {
		return st.span
	}
	span := 1
	for span < maxSpan && float64(span) < ideal {
		span *= 2
	}
	if old := st.span; old != span && old != 0 {
		for k := range ps.chunks {
			if k.kind == kind && k.variant == v && k.span == old {
				delete(ps.chunks, k)
			}
		}
	}
	st.span = span
	return span
}

// measuredLocked records the bytes per instance of a document just
// assembled, for the next document's span.
func (ps *pieceStore) measuredLocked(kind docKind, v int, apps []registry.AppView, bytes int) {
	instances := 0
	for _, a := range apps {
		instances += len(a.Instances)
	}
	if instances > 0 {
		ps.spans[kind.index()][v].perInstance = float64(bytes) / float64(instances)
	}
}

// gzFooters are the full documents' footers, compressed once.
var gzFooters = [2]gzjoin.Piece{
	formatJSON: gzjoin.Compress([]byte(wire.ApplicationsFooterJSON)),
	formatXML:  gzjoin.Compress([]byte(wire.ApplicationsFooterXML)),
}

// documentEnds returns the header and the footer of an applications
// document. A full one carries versions__delta and apps__hashcode in its
// header, a compact one in its footer (wire/encode_compact.go).
func documentEnds(compact, xml bool, versionsDelta, hashcode string) (header, footer []byte) {
	switch {
	case compact && xml:
		return []byte(wire.ApplicationsHeaderCompactXML), wire.AppendApplicationsFooterCompactXML(nil, versionsDelta, hashcode)
	case compact:
		return []byte(wire.ApplicationsHeaderCompactJSON), wire.AppendApplicationsFooterCompactJSON(nil, versionsDelta, hashcode)
	case xml:
		return wire.AppendApplicationsHeaderXML(nil, versionsDelta, hashcode), []byte(wire.ApplicationsFooterXML)
	default:
		return wire.AppendApplicationsHeaderJSON(nil, versionsDelta, hashcode), []byte(wire.ApplicationsFooterJSON)
	}
}

// document assembles an applications document of apps (the registry's
// apps, or the delta's groups when kind.delta) from their pieces, in the
// form kind.compact says.
func (ps *pieceStore) document(kind docKind, apps []registry.AppView, versionsDelta, hashcode string, f payloadFormat, gz bool) payload {
	pcs := ps.ofAll(kind, apps)
	xml := f == formatXML
	header, footer := documentEnds(kind.compact, xml, versionsDelta, hashcode)
	v := variantJSONGzNext
	switch {
	case !gz && xml:
		v = variantXML
	case !gz:
		v = variantJSON
	case xml:
		v = variantXMLGz
	}
	ps.mu.Lock()
	span := ps.spanLocked(kind, v, apps)
	ps.mu.Unlock()
	chunks := (len(pcs) + span - 1) / span
	group := func(i int) []*appPieces { return pcs[i*span : min((i+1)*span, len(pcs))] }
	measured := func(parts [][]byte) {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		ps.mu.Lock()
		ps.measuredLocked(kind, v, apps, n)
		ps.mu.Unlock()
	}
	if !gz {
		parts := make([][]byte, 0, chunks+2)
		parts = append(parts, header)
		for i := range chunks {
			c := ps.chunkOf(chunkKey{kind, v, span, i}, group(i), func() *chunk {
				g := group(i)
				n := 0
				for _, p := range g {
					n += len(ps.plainOf(p, xml)) + 1
				}
				b := make([]byte, 0, n)
				members := make([]chunkMember, len(g))
				for j, p := range g {
					if !xml && (i > 0 || j > 0) {
						b = append(b, ',')
					}
					piece := ps.plainOf(p, xml)
					members[j] = chunkMember{p: p, v: v, off: len(b), n: len(piece)}
					b = append(b, piece...)
				}
				return &chunk{plain: b, members: members}
			})
			parts = append(parts, c.plain)
		}
		parts = append(parts, footer)
		measured(parts)
		return partsPayload(parts)
	}

	pieces := make([]gzjoin.Piece, 0, chunks+2)
	pieces = append(pieces, gzjoin.Compress(header))
	for i := range chunks {
		// A chunk's first piece refers into the app before it (gzOf), so
		// the chunk is kept only while that app is the same too.
		from := pcs[max(i*span-1, 0):min((i+1)*span, len(pcs))]
		c := ps.chunkOf(chunkKey{kind, v, span, i}, from, func() *chunk {
			start, end := i*span, min((i+1)*span, len(pcs))
			var gps []gzjoin.Piece
			var members []chunkMember
			off := 0
			for k := start; k < end; {
				var pred *appPieces
				if k > 0 {
					pred = pcs[k-1]
				}
				if isSmallApp(kind, pcs[k]) {
					e := runEnd(kind, pcs, k, end)
					g := ps.runOf(kind, v, pcs[k:e], pred)
					gps = append(gps, g)
					off += len(g.Deflate)
					k = e
					continue
				}
				pv := v
				if pv == variantJSONGzNext && k == 0 {
					pv = variantJSONGzFirst
				}
				g := ps.gzOf(pcs[k], pv, pred)
				gps = append(gps, g)
				members = append(members, chunkMember{p: pcs[k], v: pv, off: off, n: len(g.Deflate)})
				off += len(g.Deflate)
				k++
			}
			return &chunk{gz: gzjoin.Join(gps), members: members}
		})
		pieces = append(pieces, c.gz)
	}
	if kind.compact {
		pieces = append(pieces, gzjoin.Compress(footer)) // it carries the hashcode
	} else {
		pieces = append(pieces, gzFooters[f])
	}
	head, trailer := gzjoin.Frame(pieces)
	parts := make([][]byte, 0, len(pieces)+2)
	parts = append(parts, head)
	for _, p := range pieces {
		parts = append(parts, p.Deflate)
	}
	parts = append(parts, trailer)
	measured(parts)
	return partsPayload(parts)
}

// vipDocument assembles a VIP lookup's document (plain), in the full or
// the compact form: an app whose instances all match is the app's own
// piece; a partial match is encoded for this document.
func (ps *pieceStore) vipDocument(snap *registry.Snapshot, apps []registry.AppView, f payloadFormat, compact bool) payload {
	xml := f == formatXML
	header, footer := documentEnds(compact, xml, "1", registry.HashcodeOf(apps))
	parts := [][]byte{header}
	for i, a := range apps {
		if !xml && i > 0 {
			parts = append(parts, []byte{','})
		}
		if whole, ok := snap.App(a.Name); ok && len(whole.Instances) == len(a.Instances) {
			parts = append(parts, ps.plainOf(ps.of(docKind{compact: compact}, whole), xml))
			continue
		}
		ps.encodings.Add(1)
		parts = append(parts, appendPiece(nil, a, xml, compact))
	}
	parts = append(parts, footer)
	return partsPayload(parts)
}

// appDocument is a single application (GET /apps/{app}), from its piece.
func (ps *pieceStore) appDocument(app registry.AppView, f payloadFormat, compact bool) payload {
	piece := ps.plainOf(ps.of(docKind{compact: compact}, app), f == formatXML)
	if f == formatXML {
		return bytesPayload(piece)
	}
	return partsPayload([][]byte{[]byte(`{"application":`), piece, []byte("}")})
}
