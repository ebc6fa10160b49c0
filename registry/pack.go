package registry

import (
	"reflect"
	"sync"
	"unsafe"
)

// Packing: what the collector has to follow of a stored instance.
//
// Every GC cycle marks every live instance, and at a million of them the
// cost is set by how many distinct objects it reaches and how many heap
// pointers it follows to get there: each is a lookup of its span, a cache
// and TLB miss once the registry outgrows the caches. Decoded as it comes,
// an instance is three objects besides its lease: the Instance, its
// metadata array and its strings (the decoders copy those into one block so
// that they do not pin the request body). packInstance makes the metadata
// array and the strings one object, so an instance is the Instance (480 B,
// small enough for the collector's span-at-a-time scan, which it would lose
// if the metadata joined it) and one pack; the metadata's pointers then
// point into the object being scanned. Values every instance shares (the
// statuses, the data center names, the usual metadata keys) are pointed at
// constants, which the collector skips without a lookup, and empty strings
// hold no pointer at all.
//
// A pack is a struct of a [k]KV array followed by a [n]byte array, its type
// made by reflect once per (k, n rounded up) and kept: the collector knows
// from the type that only the first part holds pointers. The strings are
// views of the byte array (unsafe.String); they keep the pack alive like
// any interior pointer, and nothing writes the bytes once the strings
// exist, so the instance stays immutable as before.

// Pack sizes: beyond these the metadata array and the strings are two
// objects, as the decoders make them (a rare instance; the number of pack
// types stays bounded whatever clients send).
const (
	packMaxKVs   = 16
	packMaxBytes = 4096
	packByteStep = 32 // byte arrays are rounded up to this, to bound the types
)

type packKey struct{ kvs, bytes int }

// packTypes caches the pack types by packKey.
var packTypes sync.Map

var (
	kvType   = reflect.TypeFor[KV]()
	byteType = reflect.TypeFor[byte]()
)

func packType(k packKey) reflect.Type {
	if t, ok := packTypes.Load(k); ok {
		return t.(reflect.Type)
	}
	t := reflect.StructOf([]reflect.StructField{
		{Name: "KVs", Type: reflect.ArrayOf(k.kvs, kvType)},
		{Name: "Bytes", Type: reflect.ArrayOf(k.bytes, byteType)},
	})
	actual, _ := packTypes.LoadOrStore(k, t)
	return actual.(reflect.Type)
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
	if c, ok := commonStrings[s]; ok {
		return c
	}
	n := copy(p.bytes, s)
	out := unsafe.String(&p.bytes[0], n)
	p.bytes = p.bytes[n:]
	return out
}

// packedLen is how many bytes the pack of s takes.
func packedLen(s string) int {
	if _, ok := commonStrings[s]; ok {
		return 0
	}
	return len(s)
}

// packInstance points in's variable strings and metadata into one new
// allocation, and its common values at constants. Field values, metadata
// order and lengths are unchanged; in must not have been published yet
// (it is the fresh copy a write is about to store). Nothing in it refers
// to the memory it was decoded from afterwards.
func packInstance(in *Instance) {
	in.Status = canonicalStatus(in.Status)
	in.OverriddenStatus = canonicalStatus(in.OverriddenStatus)
	in.ActionType = canonicalAction(in.ActionType)
	dc := &in.DataCenterInfo
	kvs := len(in.Metadata) + len(dc.Metadata)
	size := 0
	in.eachPackedString(func(s *string) { size += packedLen(*s) })
	var p packer
	var md []KV
	switch {
	case kvs == 0 && size == 0:
	case kvs == 0:
		p.bytes = make([]byte, size)
	case kvs <= packMaxKVs && size <= packMaxBytes:
		t := packType(packKey{kvs, (size + packByteStep - 1) / packByteStep * packByteStep})
		base := reflect.New(t).UnsafePointer()
		md = unsafe.Slice((*KV)(base), kvs)
		if size > 0 {
			p.bytes = unsafe.Slice((*byte)(unsafe.Add(base, t.Field(1).Offset)), size)
		}
	default:
		md = make([]KV, kvs)
		p.bytes = make([]byte, size)
	}
	if kvs > 0 {
		n := copy(md, in.Metadata)
		copy(md[n:], dc.Metadata)
		// Full slice expressions: appending to one can never write into
		// the other.
		in.Metadata, dc.Metadata = nilIfEmpty(md[:n:n]), nilIfEmpty(md[n:])
	}
	in.eachPackedString(func(s *string) { *s = p.str(*s) })
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
// center names and classes, the metadata keys Spring Cloud, the Eureka
// clients and AWS set, and the values they usually have.
var commonStrings = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		DataCenterClassDefault, DataCenterClassAmazon, "MyOwn", "Amazon", "Netflix",
		"true", "false", "http", "https", "8080", "8081", "8443", "9090",
		"management.port", "management.context-path", "management.address", "zone", "instanceId",
		"version", "profile", "secure", "jmx.port", "grpc.port", "gRPC_port", "configPath",
		"prometheus.scrape", "prometheus.path", "prometheus.port", "/actuator", "/actuator/prometheus",
		"ami-id", "ami-launch-index", "ami-manifest-path", "availability-zone", "hostname",
		"instance-id", "instance-type", "local-hostname", "local-ipv4", "public-hostname",
		"public-ipv4", "vpc-id", "accountId", "mac", "kernel-id", "ramdisk-id",
	} {
		m[s] = s
	}
	return m
}()

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
