package registry

import (
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
