package registry

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
	"weak"
)

// packSample is an instance with every string field set and both kinds of
// metadata, its variable strings views of one big body as a decoder makes
// them.
func packSample(body string) *Instance {
	at := func(s string) string {
		i := strings.Index(body, s)
		if i < 0 {
			panic("not in body: " + s)
		}
		return body[i : i+len(s)]
	}
	return &Instance{
		InstanceID: at("host-1:orders:8080"), HostName: at("host-1"), App: at("ORDERS"),
		IPAddr: at("10.0.0.1"), Sid: at("sid-7"), Status: StatusUp, OverriddenStatus: StatusUnknown,
		Port: Port{Number: 8080, Enabled: true}, SecurePort: Port{Number: 8443}, CountryID: 1,
		DataCenterInfo: DataCenterInfo{Class: DataCenterClassAmazon, Name: at("Amazon"),
			Metadata: Metadata{{Key: at("availability-zone"), Value: at("eu-west-1a")}, {Key: at("instance-id"), Value: at("i-0abc")}}},
		Metadata: Metadata{{Key: at("git.commit"), Value: at("deadbee")}, {Key: at("management.port"), Value: at("8081")},
			{Key: at("zone"), Value: at("eu-west-1a")}},
		AppGroupName: at("SHOP"), HomePageURL: at("http://host-1:8080/"), StatusPageURL: at("http://host-1:8081/info"),
		HealthCheckURL: at("http://host-1:8081/health"), SecureHealthCheckURL: at("https://host-1:8443/health"),
		VIPAddress: at("orders"), SecureVIPAddress: at("orders-secure"), ASGName: at("orders-asg"),
		LastDirtyTimestamp: 1_700_000_000_000, ActionType: ActionAdded,
	}
}

const packBody = `host-1:orders:8080 ORDERS 10.0.0.1 sid-7 Amazon availability-zone eu-west-1a instance-id i-0abc ` +
	`git.commit deadbee management.port 8081 zone SHOP http://host-1:8080/ http://host-1:8081/info ` +
	`http://host-1:8081/health https://host-1:8443/health orders orders-secure orders-asg`

// deepCopy copies in, its metadata arrays and its strings, sharing nothing.
func deepCopy(in *Instance) *Instance {
	c := *in
	c.Metadata = append(Metadata(nil), in.Metadata...)
	c.DataCenterInfo.Metadata = append(Metadata(nil), in.DataCenterInfo.Metadata...)
	c.eachPackedString(func(s *string) { *s = strings.Clone(*s) })
	return &c
}

func TestPackInstance_keepsEveryValue(t *testing.T) {
	in := packSample(packBody)
	want := deepCopy(in)
	in = packInstance(in)
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("packed instance differs:\n got %+v\nwant %+v", in, want)
	}
	if got, ok := in.Metadata.Get("management.port"); !ok || got != "8081" {
		t.Errorf("Metadata.Get(management.port) = %q, %v; want 8081, true", got, ok)
	}
	if _, ok := in.Metadata.Get("instance-id"); ok {
		t.Error("the data center's metadata leaked into the instance's")
	}
	if in.ID() != "host-1:orders:8080" {
		t.Errorf("ID() = %q", in.ID())
	}
	// The metadata slices share one array; appending to the instance's
	// must not overwrite the data center's.
	_ = append(in.Metadata, KV{"x", "y"})
	if !reflect.DeepEqual(in.DataCenterInfo.Metadata, want.DataCenterInfo.Metadata) {
		t.Errorf("append to Metadata changed DataCenterInfo.Metadata: %v", in.DataCenterInfo.Metadata)
	}
}

// The instance a write copies is published: packing the copy must leave
// it, and the arrays it shares with the copy, as they were.
func TestPackInstance_leavesTheOriginalAlone(t *testing.T) {
	orig := packSample(packBody)
	want := deepCopy(orig)
	c := packInstance(orig.Clone())
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("packing a clone changed the original:\n got %+v\nwant %+v", orig, want)
	}
	if &c.Metadata[0] == &orig.Metadata[0] {
		t.Error("the packed copy still shares the original's metadata array")
	}
}

func TestPackInstance_commonValuesAndEmptyStringsHoldNoCopy(t *testing.T) {
	in := packSample(packBody)
	in.Sid, in.ASGName = "", ""
	in.Status = Status(strings.Clone("UP"))
	in = packInstance(in)
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for _, c := range []struct{ name, got, want string }{
		{"status", string(in.Status), string(StatusUp)},
		{"overriddenStatus", string(in.OverriddenStatus), string(StatusUnknown)},
		{"dataCenterInfo.class", in.DataCenterInfo.Class, DataCenterClassAmazon},
		{"metadata key", in.Metadata[1].Key, commonStrings["management.port"]},
		{"metadata value", in.Metadata[1].Value, commonStrings["8081"]},
	} {
		if !same(c.got, c.want) {
			t.Errorf("%s %q is a copy, not the shared constant", c.name, c.got)
		}
	}
	if unsafe.StringData(in.Sid) != nil || unsafe.StringData(in.ASGName) != nil {
		t.Error("an empty string still points somewhere")
	}
}

// The instance, its metadata arrays and its strings are one allocation:
// every pointer of the packed Instance is into itself, which the collector
// passes without a lookup (docs/performance.md, "A light collector at
// 1M").
func TestPackInstance_oneAllocation(t *testing.T) {
	in := packInstance(packSample(packBody))
	kvs := len(in.Metadata) + len(in.DataCenterInfo.Metadata)
	size := 0
	in.eachPackedString(func(s *string) { size += packedLen(*s) })
	pt := packType(kvs, (size+packByteStep-1)/packByteStep)
	start := uintptr(unsafe.Pointer(in))
	end := start + pt.Size()
	inside := func(what string, p unsafe.Pointer) {
		if a := uintptr(p); a < start || a >= end {
			t.Errorf("%s at %#x, outside the instance's allocation [%#x, %#x)", what, a, start, end)
		}
	}
	inside("metadata", unsafe.Pointer(unsafe.SliceData(in.Metadata)))
	inside("data center metadata", unsafe.Pointer(unsafe.SliceData(in.DataCenterInfo.Metadata)))
	in.eachPackedString(func(s *string) {
		if _, ok := common(*s); !ok && *s != "" {
			inside(fmt.Sprintf("string %q", *s), unsafe.Pointer(unsafe.StringData(*s)))
		}
	})
}

// Instances beyond a pack's size (many metadata entries, long strings)
// are packed in two objects and keep every value.
func TestPackInstance_beyondPackSizes(t *testing.T) {
	in := packSample(packBody)
	var md Metadata
	for i := range packMaxKVs + 3 {
		md = append(md, KV{Key: strings.Repeat("k", i+1), Value: strings.Repeat("v", 300)})
	}
	in.Metadata = md
	want := deepCopy(in)
	in = packInstance(in)
	if !reflect.DeepEqual(in, want) {
		t.Fatal("a large instance differs after packing")
	}
}

// A registered instance, however its strings were made, keeps nothing of
// the body they came from: the registry holds it for as long as it lives.
func TestRegister_storedInstanceDoesNotPinItsBody(t *testing.T) {
	r := newPackTestRegistry(t)
	body := packBody + strings.Repeat(" padding", 1<<17) // ~1 MB
	gone := weak.Make(unsafe.StringData(body))
	in := packSample(body)
	body = ""
	stored, err := r.Apply(RegisterOp(in))
	if err != nil {
		t.Fatal(err)
	}
	// A metadata write stores a new copy too.
	if _, err := r.Apply(MetadataOp("ORDERS", "host-1:orders:8080", map[string]string{strings.Clone("k"): strings.Clone("v")})); err != nil {
		t.Fatal(err)
	}
	in = nil
	for range 3 {
		runtime.GC()
	}
	if gone.Value() != nil {
		t.Fatal("the registry keeps the registration's body alive")
	}
	snap := r.Snapshot()
	app, _ := snap.App("ORDERS")
	if len(app.Instances) != 1 || app.Instances[0].HostName != "host-1" || stored.HomePageURL != "http://host-1:8080/" {
		t.Fatalf("stored instance lost its values: %+v", app.Instances)
	}
	if v, _ := app.Instances[0].Metadata.Get("k"); v != "v" {
		t.Errorf("metadata write lost: %v", app.Instances[0].Metadata)
	}
}

// Limits are checked on what the client sent, before packing: an
// instance at the limits is stored whole, one byte beyond is refused.
func TestRegister_packedInstanceLimits(t *testing.T) {
	r := newPackTestRegistry(t)
	lim := r.cfg.Limits
	in := packSample(packBody)
	in.DataCenterInfo = DataCenterInfo{Name: "MyOwn"}
	in.Metadata = Metadata{{Key: "big", Value: strings.Repeat("v", lim.MaxMetadataBytes-len("big"))}}
	in.HomePageURL = strings.Repeat("h", lim.MaxNameLength)
	stored, err := r.Apply(RegisterOp(in))
	if err != nil {
		t.Fatalf("an instance at the limits: %v", err)
	}
	if len(stored.Metadata[0].Value) != lim.MaxMetadataBytes-3 || len(stored.HomePageURL) != lim.MaxNameLength {
		t.Fatal("the stored instance lost bytes")
	}
	in = packSample(packBody)
	in.DataCenterInfo = DataCenterInfo{Name: "MyOwn"}
	in.Metadata = Metadata{{Key: "big", Value: strings.Repeat("v", lim.MaxMetadataBytes-len("big")+1)}}
	if _, err := r.Apply(RegisterOp(in)); err == nil {
		t.Fatal("metadata one byte beyond the limit was accepted")
	}
}

func newPackTestRegistry(t *testing.T) *Registry {
	t.Helper()
	now := time.Unix(1_700_000_000, 0)
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return now }
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every field of Instance that holds a pointer, and what packInstance does
// with it. A pointer-free pack (packedAlone) hides its pointers from the
// collector, which is sound only while each of them leads into the pack
// or to a constant: a new pointer field must be packed (eachPackedString)
// or make the pack a scanned one (packedAlone), and then be listed here.
func TestPackInstance_pointersTheCollectorNeedsNot(t *testing.T) {
	handled := map[string]string{
		"Status": "constant", "OverriddenStatus": "constant", "ActionType": "constant",
		"Metadata": "packed", "DataCenterInfo.Metadata": "packed",
		"Pieces": "scanned pack", "Health": "scanned pack",
	}
	in := &Instance{}
	in.eachPackedString(func(s *string) {
		for _, f := range pointerFields(reflect.TypeFor[Instance](), "") {
			if f.offset == uintptr(unsafe.Pointer(s))-uintptr(unsafe.Pointer(in)) {
				handled[f.name] = "packed"
			}
		}
	})
	for _, f := range pointerFields(reflect.TypeFor[Instance](), "") {
		if _, ok := handled[f.name]; !ok {
			t.Errorf("Instance.%s holds a pointer that packInstance neither packs nor makes a scanned pack for", f.name)
		}
	}
}

type pointerField struct {
	name   string
	offset uintptr
}

// pointerFields lists the fields of struct type t that hold pointers
// (strings, slices, pointers, maps, ...), nested structs by their path.
func pointerFields(t reflect.Type, prefix string) []pointerField {
	var out []pointerField
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Type.Kind() == reflect.Struct:
			for _, g := range pointerFields(f.Type, prefix+f.Name+".") {
				out = append(out, pointerField{g.name, f.Offset + g.offset})
			}
		case f.Type.Kind() == reflect.Array:
			if f.Type.Size() > 0 && pointerFree(f.Type.Elem()) {
				continue
			}
			out = append(out, pointerField{prefix + f.Name, f.Offset})
		case !pointerFree(f.Type):
			out = append(out, pointerField{prefix + f.Name, f.Offset})
		}
	}
	return out
}

func pointerFree(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	case reflect.Array:
		return pointerFree(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !pointerFree(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// Instances the collector does not scan stay whole through collections
// that free everything else they were made from, and the memory freed is
// used again meanwhile: a pack that hid a pointer the collector needed
// would come back with another value in it. Some instances carry Pieces
// and a health mark (scanned packs), some are cloned, written again and
// cancelled, so packs of both kinds come and go. Run it with
// GODEBUG=clobberfree=1 too: freed memory is then overwritten at once.
func TestPackInstance_survivesCollections(t *testing.T) {
	r := newPackTestRegistry(t)
	const n = 2000
	want := map[string]*Instance{}
	for i := range n {
		in := packSample(packBody)
		in.InstanceID, in.HostName = fmt.Sprintf("host-%d:orders:8080", i), fmt.Sprintf("host-%d", i)
		in.IPAddr, in.HomePageURL = fmt.Sprintf("10.0.%d.%d", i/250, i%250), fmt.Sprintf("http://host-%d:8080/", i)
		in.Metadata = Metadata{{Key: "git.commit", Value: fmt.Sprintf("%07x", i)}, {Key: "management.port", Value: "8081"},
			{Key: "zone", Value: fmt.Sprintf("eu-west-1%c", 'a'+i%3)}}
		want[in.InstanceID] = deepCopy(in)
		if _, err := r.Apply(RegisterOp(in)); err != nil {
			t.Fatal(err)
		}
		w := want[in.InstanceID]
		switch i % 5 {
		case 1: // an override: Pieces, a scanned pack
			if _, err := r.Apply(StatusOp("ORDERS", in.InstanceID, StatusOutOfService)); err != nil {
				t.Fatal(err)
			}
			w.Status, w.OverriddenStatus = StatusOutOfService, StatusOutOfService
		case 2: // a metadata write: Pieces too
			md := map[string]string{fmt.Sprint("k", i): fmt.Sprint("v", i)}
			if _, err := r.Apply(MetadataOp("ORDERS", in.InstanceID, md)); err != nil {
				t.Fatal(err)
			}
			w.Metadata = w.Metadata.With(md)
		case 3: // gone
			if _, err := r.Apply(CancelOp("ORDERS", in.InstanceID)); err != nil {
				t.Fatal(err)
			}
			delete(want, in.InstanceID)
		}
	}
	var litter [][]byte
	for range 5 {
		runtime.GC()
		for j := range 20000 { // reuse what was freed, with other bytes
			litter = append(litter, bytes.Repeat([]byte{byte(j)}, 16+j%600))
		}
		litter = litter[:0]
	}
	app, _ := r.Snapshot().App("ORDERS")
	if len(app.Instances) != len(want) {
		t.Fatalf("%d instances, want %d", len(app.Instances), len(want))
	}
	for _, iv := range app.Instances {
		w := want[iv.ID()]
		if w == nil {
			t.Fatalf("unexpected instance %q", iv.ID())
		}
		got := deepCopy(iv.Instance)
		if w.OverriddenStatus == StatusOutOfService && (got.Pieces == nil || got.Pieces.Override != StatusOutOfService) {
			t.Fatalf("%s: the override's piece is lost: %+v", iv.ID(), got.Pieces)
		}
		// What the registry stamps itself.
		got.Pieces, got.ActionType, got.LastUpdatedTimestamp, got.RegistrationTimestamp, got.ServiceUpTimestamp =
			nil, w.ActionType, w.LastUpdatedTimestamp, w.RegistrationTimestamp, w.ServiceUpTimestamp
		got.WriteVersion, got.LastDirtyTimestamp = w.WriteVersion, w.LastDirtyTimestamp
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("%s after collections:\n got %+v\nwant %+v", iv.ID(), got, w)
		}
	}
	// The key index, whose addresses the collector does not see either,
	// finds every instance there is and none that went.
	for i := range n {
		id := fmt.Sprintf("host-%d:orders:8080", i)
		iv, ok := r.Instance("ORDERS", id)
		if _, want := want[id]; ok != want || ok && iv.ID() != id {
			t.Fatalf("Instance(ORDERS, %s) after collections: %v, want %v", id, ok, want)
		}
	}
}

// A write that replaces the stored instance lets the previous pack go:
// the lease's id is the current pack's, not the one it was registered
// with (once the stream and the delta no longer hold the old copy).
func TestPackInstance_replacedPackIsCollected(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return now }
	cfg.OutboxSize = 1
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Apply(RegisterOp(packSample(packBody)))
	if err != nil {
		t.Fatal(err)
	}
	gone := weak.Make(first)
	first = nil
	if _, err := r.Apply(StatusOp("ORDERS", "host-1:orders:8080", StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	other := packSample(packBody)
	other.InstanceID = "host-2:orders:8080"
	if _, err := r.Apply(RegisterOp(other)); err != nil { // the stream's one slot
		t.Fatal(err)
	}
	now = now.Add(cfg.DeltaRetention + time.Second)
	r.PruneDeltas()
	for range 3 {
		runtime.GC()
	}
	if gone.Value() != nil {
		t.Fatal("the registration's pack outlives the write that replaced it")
	}
	if iv, ok := r.Instance("ORDERS", "host-1:orders:8080"); !ok || iv.Status != StatusOutOfService {
		t.Fatalf("the instance after the write: %+v %v", iv.Instance, ok)
	}
}
