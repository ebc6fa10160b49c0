package dns

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/registry"
)

// The hot path: an app's A, AAAA and SRV answers (<app>.app,
// <zone>.<app>.app, _<app>._tcp|_tls[.<zone>].app) served from records
// packed once per app version. A query costs a map lookup, a check that
// the app has not changed since (one compare while the registry's
// version stays the same), a partial shuffle, and copying the records
// that fit into a pooled buffer written as is. Everything else (other
// names and types, empty answers, unknown apps) goes the general way
// (answer, then miekg/dns packs and truncates).
//
// The wire layout, which tools/bench's DNS ceiling serves too:
//
//	header | question (as asked) | answers | additional | OPT (EDNS0 queries)
//
// An A/AAAA answer's owner is a pointer to the question name (offset 12).
// An SRV answer's owner is that pointer too, its target <hex>.addr.<domain>
// uncompressed (RFC 2782); each SRV record's A/AAAA follows in the
// additional section, its owner a pointer to that target. Over the size
// limit whole pairs are left out (TC set): every SRV record in an answer
// comes with its address.

// packedKey names one cached answer set: the question name, lower-cased,
// and its type.
type packedKey struct {
	name  string
	qtype uint16
}

// packedSet is the answer records of one name and type for one version
// of its app, immutable but for checked.
type packedSet struct {
	app, zone, proto string // what the name asks for (app upper-cased as the registry keys it)
	version          uint64 // the app's AppView.Version the records were packed from
	// checked is the latest registry version (Snapshot.Version) at which
	// the app still had that version: while the registry stays at it,
	// nothing needs checking. (A version, not the snapshot itself: a set
	// of an app nobody asks for must not keep an old snapshot alive.)
	checked atomic.Uint64
	units   []packedUnit // one per instance that answers, in registry order
}

// packedUnit is one instance's records: the answer record (owner a
// pointer to the question name), and for SRV the additional record of its
// target's address without its owner name.
type packedUnit struct {
	an, ad []byte
}

// srvTargetAt is where an SRV record's target starts within its packed
// bytes: owner pointer 2, type, class, TTL, length 10, priority, weight,
// port 6.
const srvTargetAt = 18

// packedCache holds the packed answer sets by name.
type packedCache struct {
	mu      sync.RWMutex
	sets    map[packedKey]*packedSet
	sweepAt int // sets count at which stale sets are swept
}

const packedSweepMin = 1024

// packedBuf is a pooled scratch: the answer bytes, the shuffle's indices
// and its generator (math/rand/v2's global one costs more than the rest
// of a shuffle: it is safe for concurrent use, this one needs not be).
type packedBuf struct {
	b   []byte
	idx []int32
	rng rand.PCG
}

var packedBufs = sync.Pool{New: func() any {
	pb := &packedBuf{b: make([]byte, 0, 1232)}
	pb.rng.Seed(rand.Uint64(), rand.Uint64())
	return pb
}}

// intN is a random int in [0, n), n < 2^32 (Lemire's multiply-shift,
// without the rejection step: a bias under n/2^32).
func (pb *packedBuf) intN(n int) int {
	return int((pb.rng.Uint64() >> 32) * uint64(n) >> 32)
}

// serveFast answers q from the packed cache when it can, and says whether
// it did (false: nothing written, nothing counted).
func (s *Server) serveFast(w mdns.ResponseWriter, q *mdns.Msg, src netip.Addr, tcp bool, start time.Time) bool {
	if q.Opcode != mdns.OpcodeQuery || len(q.Question) != 1 {
		return false
	}
	question := q.Question[0]
	switch question.Qtype {
	case mdns.TypeA, mdns.TypeAAAA, mdns.TypeSRV:
	default:
		return false
	}
	set := s.packedSet(packedKey{strings.ToLower(question.Name), question.Qtype})
	if set == nil {
		return false
	}

	size := mdns.MinMsgSize
	opt := q.IsEdns0()
	if opt != nil {
		size = max(size, min(int(opt.UDPSize()), s.cfg.UDPMaxSize))
	}
	if tcp {
		size = mdns.MaxMsgSize
	}
	optLen := 0
	if opt != nil {
		optLen = 11
	}

	pb := packedBufs.Get().(*packedBuf)
	defer packedBufs.Put(pb)
	// The question as asked (its case kept), then the records that fit.
	b := append(pb.b[:0], make([]byte, 12)...)
	b = appendName(b, question.Name)
	b = binary.BigEndian.AppendUint16(b, question.Qtype)
	b = binary.BigEndian.AppendUint16(b, question.Qclass)

	// A random subset of at most MaxAnswers, in random order: the first k
	// of a partial Fisher-Yates shuffle.
	n := len(set.units)
	k := min(n, s.cfg.MaxAnswers)
	idx := pb.idx[:0]
	for i := range n {
		idx = append(idx, int32(i))
	}
	for i := range k {
		j := i + pb.intN(n-i)
		idx[i], idx[j] = idx[j], idx[i]
	}
	pb.idx = idx

	// How many fit. An SRV answer's additional owner is a pointer to its
	// target; past a pointer's reach (16 KiB, over TCP) the target's first
	// label and a pointer to the first target's addr.<domain>.
	srv := question.Qtype == mdns.TypeSRV
	l, fit := len(b)+optLen, 0
	suffix := 0 // where the first target's addr.<domain> starts
	if srv && k > 0 {
		suffix = len(b) + srvTargetAt + 1 + int(set.units[idx[0]].an[srvTargetAt])
	}
	for an, i := len(b), 0; i < k; i++ {
		u := &set.units[idx[i]]
		ul := len(u.an)
		if srv {
			ul += len(u.ad) + ownerLen(an+srvTargetAt, u.an)
		}
		if l+ul > size {
			break
		}
		l += ul
		an += len(u.an)
		fit++
	}
	truncated := fit < k

	t := len(b)
	for _, i := range idx[:fit] {
		b = append(b, set.units[i].an...)
	}
	if srv {
		for _, i := range idx[:fit] {
			u := &set.units[i]
			if target := t + srvTargetAt; target < 0x4000 {
				b = append(b, 0xC0|byte(target>>8), byte(target))
			} else {
				first := u.an[srvTargetAt : srvTargetAt+1+int(u.an[srvTargetAt])]
				b = append(append(b, first...), 0xC0|byte(suffix>>8), byte(suffix))
			}
			b = append(b, u.ad...)
			t += len(u.an)
		}
	}
	if opt != nil {
		// Root owner, type OPT, class = our UDP size, TTL 0 (no DO), no options.
		b = append(b, 0, 0, 41)
		b = binary.BigEndian.AppendUint16(b, uint16(min(s.cfg.UDPMaxSize, 65535)))
		b = append(b, 0, 0, 0, 0, 0, 0)
	}

	flags := uint16(1<<15 | 1<<10) // QR, AA; opcode QUERY, rcode NOERROR
	if truncated {
		flags |= 1 << 9
	}
	if q.RecursionDesired {
		flags |= 1 << 8
	}
	if q.CheckingDisabled {
		flags |= 1 << 4
	}
	binary.BigEndian.PutUint16(b[0:], q.Id)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint16(b[4:], 1)
	binary.BigEndian.PutUint16(b[6:], uint16(fit))
	binary.BigEndian.PutUint16(b[8:], 0)
	ar := 0
	if srv {
		ar = fit
	}
	if opt != nil {
		ar++
	}
	binary.BigEndian.PutUint16(b[10:], uint16(ar))
	pb.b = b

	_, _ = w.Write(b)
	if s.onAnswer != nil {
		// The set is current at the version it was last checked at.
		s.onAnswer(src, set.app, set.checked.Load())
	}
	if truncated {
		s.m.truncated.Inc()
	}
	s.m.answered(question.Qtype).Inc()
	s.m.latency.Observe(time.Since(start).Seconds())
	return true
}

// ownerLen is the length of an additional record's owner for the SRV
// record an whose target would start at offset target: a pointer, or past
// a pointer's reach the first label and a pointer.
func ownerLen(target int, an []byte) int {
	if target < 0x4000 {
		return 2
	}
	return 1 + int(an[srvTargetAt]) + 2
}

// appendName packs a name given in presentation form with no escapes
// (packedSet only holds such names, so a hit's name has none either).
func appendName(b []byte, name string) []byte {
	for name != "" && name != "." {
		i := strings.IndexByte(name, '.')
		if i < 0 {
			i = len(name)
		}
		b = append(b, byte(i))
		b = append(b, name[:i]...)
		if i == len(name) {
			break
		}
		name = name[i+1:]
	}
	return append(b, 0)
}

// packedSet is the current answer set for key, packed now if it is not
// cached or its app changed; nil when the general way must answer.
func (s *Server) packedSet(key packedKey) *packedSet {
	c := &s.packed
	c.mu.RLock()
	set := c.sets[key]
	c.mu.RUnlock()
	snap := s.reg.Snapshot()
	if set != nil {
		if set.checked.Load() == snap.Version {
			return set
		}
		if view, ok := snap.App(set.app); ok && view.Version == set.version {
			set.checked.Store(snap.Version)
			return set
		}
		app, zone, proto := set.app, set.zone, set.proto
		set = s.pack(snap, key, app, zone, proto)
	} else {
		app, zone, proto, ok := s.packable(key.name)
		if !ok {
			return nil
		}
		set = s.pack(snap, key, strings.ToUpper(app), zone, proto)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if set == nil {
		delete(c.sets, key)
		return nil
	}
	if c.sets == nil {
		c.sets = map[packedKey]*packedSet{}
	}
	c.sets[key] = set
	if len(c.sets) >= c.sweepAt {
		// Forget the sets of apps gone or changed since: the cache holds
		// at most about twice the live sets.
		for k, old := range c.sets {
			if view, ok := snap.App(old.app); !ok || view.Version != old.version {
				delete(c.sets, k)
			}
		}
		c.sweepAt = max(packedSweepMin, 2*len(c.sets))
	}
	return set
}

// packable parses a lower-cased name of the hot path: a local app's
// address or SRV name, plain letters, digits, '-' and '_' (no escapes).
func (s *Server) packable(name string) (app, zone, proto string, ok bool) {
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", "", "", false
		}
	}
	rel, found := strings.CutSuffix(name, ".app."+s.domain)
	if !found || rel == "" {
		return "", "", "", false
	}
	labels := strings.Split(rel, ".")
	for _, l := range labels {
		if l == "" {
			return "", "", "", false
		}
	}
	if s.remote != nil && labels[len(labels)-1] == "app" {
		// <app>.app.<region> with a region named app: the general way
		// decides (a remote region's apps are not packed).
		return "", "", "", false
	}
	switch {
	case len(labels) >= 2 && len(labels) <= 3 && strings.HasPrefix(labels[0], "_") && (labels[1] == "_tcp" || labels[1] == "_tls"):
		app, proto = labels[0][1:], labels[1]
		if len(labels) == 3 {
			zone = labels[2]
		}
	case len(labels) == 1:
		app = labels[0]
	case len(labels) == 2:
		zone, app = labels[0], labels[1]
	default:
		return "", "", "", false
	}
	if app == "" {
		return "", "", "", false
	}
	return app, zone, proto, true
}

// pack builds the answer set of key from snap: nil when the app is
// unknown or nothing answers (the general way answers those, with the SOA).
func (s *Server) pack(snap *registry.Snapshot, key packedKey, app, zone, proto string) *packedSet {
	if (proto == "") == (key.qtype == mdns.TypeSRV) {
		return nil // SRV on an address name, or A/AAAA on an SRV name: empty
	}
	view, ok := snap.App(app)
	if !ok {
		return nil
	}
	set := &packedSet{app: app, zone: zone, proto: proto, version: view.Version}
	set.checked.Store(snap.Version)
	ttl := uint32(s.cfg.TTL)
	for _, iv := range view.Instances {
		in := iv.Instance
		if iv.Status != registry.StatusUp || (zone != "" && !strings.EqualFold(InstanceZone(in), zone)) {
			continue
		}
		ip, err := netip.ParseAddr(in.IPAddr)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		switch key.qtype {
		case mdns.TypeA, mdns.TypeAAAA:
			if ip.Is4() != (key.qtype == mdns.TypeA) {
				continue
			}
			set.units = append(set.units, packedUnit{an: appendAddrRR([]byte{0xC0, 12}, ip, ttl)})
		case mdns.TypeSRV:
			port := in.Port
			if proto == "_tls" {
				port = in.SecurePort
			}
			if !port.Enabled || port.Number <= 0 || port.Number > 65535 {
				continue
			}
			target := appendName(nil, addrLabel(ip)+".addr."+s.domain)
			an := []byte{0xC0, 12}
			an = binary.BigEndian.AppendUint16(an, mdns.TypeSRV)
			an = binary.BigEndian.AppendUint16(an, mdns.ClassINET)
			an = binary.BigEndian.AppendUint32(an, ttl)
			an = binary.BigEndian.AppendUint16(an, uint16(6+len(target)))
			an = binary.BigEndian.AppendUint16(an, 0) // priority
			an = binary.BigEndian.AppendUint16(an, instanceWeight(in))
			an = binary.BigEndian.AppendUint16(an, uint16(port.Number))
			an = append(an, target...)
			set.units = append(set.units, packedUnit{an: an, ad: appendAddrRR(nil, ip, ttl)})
		}
	}
	if len(set.units) == 0 {
		return nil
	}
	return set
}

// appendAddrRR appends an A or AAAA record of ip after its owner (already
// in b, or written later).
func appendAddrRR(b []byte, ip netip.Addr, ttl uint32) []byte {
	t := mdns.TypeAAAA
	if ip.Is4() {
		t = mdns.TypeA
	}
	a := ip.AsSlice()
	b = binary.BigEndian.AppendUint16(b, t)
	b = binary.BigEndian.AppendUint16(b, mdns.ClassINET)
	b = binary.BigEndian.AppendUint32(b, ttl)
	b = binary.BigEndian.AppendUint16(b, uint16(len(a)))
	return append(b, a...)
}
