package registry

import (
	"reflect"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Packing: what the collector has to follow of a stored instance.
//
// Every GC cycle marks every live instance, and at a million of them the
// cost is set by how many objects it reaches and how many heap pointers it
// follows to get there: each pointer to another object is a lookup of the
// target's span, a cache and TLB miss once the registry outgrows the
// caches, while a pointer into the object being scanned is passed with a
// comparison. Decoded as it comes, an instance is three objects: the
// Instance, its metadata array and its strings (the decoders copy those
// into one block so that they do not pin the request body), and the
// Instance holds some twenty pointers into the other two. packInstance
// copies the Instance, its metadata entries (the instance's and the data
// center's) and the bytes of every variable string into one allocation,
// so every pointer the stored Instance holds is into itself. Values every
// instance shares (the statuses, the data center names, the usual
// metadata keys) are pointed at constants, which need no span lookup, and
// empty strings hold no pointer at all. What the collector still follows
// an instance is the lease's pointer to it and the snapshot's (see
// keyindex.go for the indexes, and docs/performance.md, "A light
// collector at 1M").
//
// Pointer-free packs. Once packed, the pointers an Instance holds lead
// into its own pack or to constants in the binary, except Pieces and
// Health (objects of their own, nil for an instance that only ever had a
// registration). None of those is anything the collector must find
// through the pack: the pack is live exactly when something else points
// into it, and constants are not heap. So a pack without Pieces and Health
// is allocated as memory of the same layout that the collector does not
// scan (a []uint64; packedAlone), and a cycle marks it, on the lease's or
// the snapshot's pointer, without reading it. Scanning a pack was the
// largest part of a cycle at a million (a cache miss on each first
// touch, then ~25 pointer words compared and passed). This relies on the
// collector not moving objects (Go's does not) and on the rule kept here:
// nothing is written into a stored Instance after packInstance, and
// packInstance leaves in the pack no pointer but into it or at a
// constant (TestPackInstance_pointersTheCollectorNeedsNot guards the
// Instance's pointer fields). A copy taken of a stored instance (Clone,
// a snapshot view's string) is ordinary scanned memory pointing into the
// pack, which keeps the pack alive as any interior pointer does.
//
// A pack is a struct of the Instance, a [k]KV array and a [n]byte array,
// its type made by reflect once per (k, n rounded up) and kept: the
// collector knows from the type that the byte array holds no pointers.
// The strings are views of the byte array (unsafe.String); they keep the
// pack alive like any interior pointer, and nothing writes the bytes once
// the strings exist, so the instance stays immutable as before.

// Pack sizes: beyond these the Instance, the metadata array and the
// strings are three objects, as the decoders make them (a rare instance;
// the number of pack types stays bounded whatever clients send).
const (
	packMaxKVs   = 16
	packMaxBytes = 4096
	packByteStep = 32 // byte arrays are rounded up to this, to bound the types
)

// packTypes holds the pack types made so far, by entries and by byte
// steps: a lookup is two indexes and an atomic load, no allocation.
var packTypes [packMaxKVs + 1][packMaxBytes/packByteStep + 1]atomic.Pointer[reflect.Type]

var (
	instanceType = reflect.TypeFor[Instance]()
	kvType       = reflect.TypeFor[KV]()
	byteType     = reflect.TypeFor[byte]()
)

// packType returns the pack type of an Instance, kvs entries and steps ×
// packByteStep bytes.
func packType(kvs, steps int) reflect.Type {
	slot := &packTypes[kvs][steps]
	if t := slot.Load(); t != nil {
		return *t
	}
	t := reflect.StructOf([]reflect.StructField{
		{Name: "Instance", Type: instanceType},
		{Name: "KVs", Type: reflect.ArrayOf(kvs, kvType)},
		{Name: "Bytes", Type: reflect.ArrayOf(steps*packByteStep, byteType)},
	})
	// Two writers may race to make the same type: either is right.
	slot.CompareAndSwap(nil, &t)
	return *slot.Load()
}

// packer hands out the parts of one pack.
type packer struct {
	bytes []byte // what is left of the byte array
}

// str returns s as a constant when it is a common value, else as a copy
// in the pack's bytes. An empty string comes back as "", no pointer.
func (p *packer) str(s string) string {
	if s == "" {
		return ""
	}
	if c, ok := common(s); ok {
		return c
	}
	n := copy(p.bytes, s)
	out := unsafe.String(&p.bytes[0], n)
	p.bytes = p.bytes[n:]
	return out
}

// packedLen is how many bytes the pack of s takes.
func packedLen(s string) int {
	if _, ok := common(s); ok {
		return 0
	}
	return len(s)
}

// common returns the constant equal to s, if there is one. Ids, host
// names and URLs are longer than the constants (but for the data center
// classes, compared on their own), so most strings are not looked up.
func common(s string) (string, bool) {
	switch {
	case s == DataCenterClassDefault:
		return DataCenterClassDefault, true
	case s == DataCenterClassAmazon:
		return DataCenterClassAmazon, true
	case len(s) > commonMaxLen:
		return "", false
	}
	c, ok := commonStrings[s]
	return c, ok
}

// packInstance returns a copy of in whose variable strings and metadata
// live in the same allocation as the Instance itself, and whose common
// values point at constants. Field values, metadata order and lengths are
// those of in; in is left as it was (it may be a published instance's
// shallow clone, sharing its arrays). Nothing in the copy refers to the
// memory in was decoded from. Beyond a pack's sizes the copy is three
// objects, the Instance, its metadata array and its strings.
//
// A pack whose every pointer is into itself or at a constant (packedAlone)
// is allocated as memory the collector does not scan: see pointer-free
// packs, above.
func packInstance(in *Instance) *Instance {
	kvs := len(in.Metadata) + len(in.DataCenterInfo.Metadata)
	size := 0
	in.eachPackedString(func(s *string) { size += packedLen(*s) })
	var p packer
	var md []KV
	var out *Instance
	if kvs <= packMaxKVs && size <= packMaxBytes {
		t := packType(kvs, (size+packByteStep-1)/packByteStep)
		var base unsafe.Pointer
		if packedAlone(in) {
			base = unsafe.Pointer(unsafe.SliceData(make([]uint64, (t.Size()+7)/8)))
		} else {
			base = reflect.New(t).UnsafePointer()
		}
		out = (*Instance)(base)
		if kvs > 0 {
			md = unsafe.Slice((*KV)(unsafe.Add(base, t.Field(1).Offset)), kvs)
		}
		if size > 0 {
			p.bytes = unsafe.Slice((*byte)(unsafe.Add(base, t.Field(2).Offset)), size)
		}
	} else {
		out = new(Instance)
		md = make([]KV, kvs)
		p.bytes = make([]byte, size)
	}
	*out = *in
	out.Status = canonicalStatus(out.Status)
	out.OverriddenStatus = canonicalStatus(out.OverriddenStatus)
	out.ActionType = canonicalAction(out.ActionType)
	if kvs > 0 {
		dc := &out.DataCenterInfo
		n := copy(md, out.Metadata)
		copy(md[n:], dc.Metadata)
		// Full slice expressions: appending to one can never write into
		// the other.
		out.Metadata, dc.Metadata = nilIfEmpty(md[:n:n]), nilIfEmpty(md[n:])
	}
	out.eachPackedString(func(s *string) { *s = p.str(*s) })
	// Until here out's strings and metadata were in's, which an unscanned
	// pack does not keep alive: in does.
	runtime.KeepAlive(in)
	return out
}

// packedAlone reports whether every pointer of in's pack will be into the
// pack or at a constant: the strings and metadata packInstance copies or
// points at constants, and the statuses and action type when they are
// known (canonicalStatus and canonicalAction give their constants) or
// empty. Pieces and Health point to objects of their own, which only a
// scanned pack keeps alive.
func packedAlone(in *Instance) bool {
	known := func(st Status) bool { return st == "" || st.check() == nil }
	switch in.ActionType {
	case "", ActionAdded, ActionModified, ActionDeleted:
	default:
		return false
	}
	return in.Pieces == nil && in.Health == nil && known(in.Status) && known(in.OverriddenStatus)
}

func nilIfEmpty(md Metadata) Metadata {
	if len(md) == 0 {
		return nil
	}
	return md
}

// eachPackedString visits the instance's strings that packInstance
// copies: every string field but the statuses, and every metadata key and
// value.
func (in *Instance) eachPackedString(f func(*string)) {
	for _, s := range [...]*string{
		&in.InstanceID, &in.HostName, &in.App, &in.IPAddr, &in.Sid,
		&in.AppGroupName, &in.HomePageURL, &in.StatusPageURL, &in.HealthCheckURL,
		&in.SecureHealthCheckURL, &in.VIPAddress, &in.SecureVIPAddress, &in.ASGName,
		&in.DataCenterInfo.Class, &in.DataCenterInfo.Name,
	} {
		f(s)
	}
	for i := range in.Metadata {
		f(&in.Metadata[i].Key)
		f(&in.Metadata[i].Value)
	}
	for i := range in.DataCenterInfo.Metadata {
		f(&in.DataCenterInfo.Metadata[i].Key)
		f(&in.DataCenterInfo.Metadata[i].Value)
	}
}

// commonStrings are values many instances carry, by themselves: data
// center names, the metadata keys Spring Cloud, the Eureka
// clients and AWS set, and the values they usually have.
var commonStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"MyOwn", "Amazon", "Netflix",
		"true", "false", "http", "https", "8080", "8081", "8443", "9090",
		"management.port", "management.context-path", "management.address", "zone", "instanceId",
		"version", "profile", "secure", "jmx.port", "grpc.port", "gRPC_port", "configPath",
		"prometheus.scrape", "prometheus.path", "prometheus.port", "/actuator", "/actuator/prometheus",
		"ami-id", "ami-launch-index", "ami-manifest-path", "availability-zone", "hostname",
		"instance-id", "instance-type", "local-hostname", "local-ipv4", "public-hostname",
		"public-ipv4", "vpc-id", "accountId", "mac", "kernel-id", "ramdisk-id",
	} {
		m[s] = s
		commonMaxLen = max(commonMaxLen, len(s))
	}
	return m
}()

// commonMaxLen is the length of the longest of commonStrings.
var commonMaxLen int

func canonicalStatus(s Status) Status {
	switch s {
	case StatusUp:
		return StatusUp
	case StatusDown:
		return StatusDown
	case StatusStarting:
		return StatusStarting
	case StatusOutOfService:
		return StatusOutOfService
	case StatusUnknown:
		return StatusUnknown
	}
	return s // "", or not a status (never stored: Validate refuses it)
}

func canonicalAction(a ActionType) ActionType {
	switch a {
	case ActionAdded:
		return ActionAdded
	case ActionModified:
		return ActionModified
	case ActionDeleted:
		return ActionDeleted
	}
	return a
}
