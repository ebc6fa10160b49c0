package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"testing"

	"github.com/muster-registry/muster/registry"
)

// slowItems reads body the way handleSlow does: per item, the decoded item
// or nil when encoding/json refuses it; err when the body as a whole is
// refused.
func slowItems(body []byte) ([]*ReplicationItem, error) {
	var list struct {
		ReplicationList []json.RawMessage `json:"replicationList"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	if list.ReplicationList == nil {
		return nil, errors.New("no replicationList")
	}
	out := make([]*ReplicationItem, len(list.ReplicationList))
	for i, raw := range list.ReplicationList {
		var it ReplicationItem
		if json.Unmarshal(raw, &it) == nil {
			out[i] = &it
		}
	}
	return out, nil
}

// checkScanMatchesJSON fails when scanBatch reads body differently from
// encoding/json: a body it accepts must be one encoding/json accepts, with
// the same items.
func checkScanMatchesJSON(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	b, ok := scanBatch(body)
	want, err := slowItems(body)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("scanBatch read a body encoding/json refuses (%v): %q", err, body)
	}
	if len(b.Items) != len(want) {
		t.Fatalf("scanBatch found %d items, encoding/json %d: %q", len(b.Items), len(want), body)
	}
	for i := range b.Items {
		got := &b.Items[i]
		if b.Err(i) != nil {
			got = nil
		}
		if (got == nil) != (want[i] == nil) || got != nil && !reflect.DeepEqual(*got, *want[i]) {
			t.Fatalf("item %d: scanBatch %+v, encoding/json %+v: %q", i, got, want[i], body)
		}
	}
	return true
}

var batchSeeds = []string{
	`{"replicationList":[]}`,
	`{"replicationList":[{"appName":"A","id":"i-1","lastDirtyTimestamp":1718000000000,"status":"UP","action":"Heartbeat"}]}`,
	` { "replicationList" : [ { "appName" : "A" , "id":"i-1","lastDirtyTimestamp":"17","overriddenStatus":"DOWN","action":"Heartbeat"} , {"appName":"B","id":"x","action":"Cancel"} ] } `,
	`{"replicationList":[{"appName":"A","id":"i-1","lastDirtyTimestamp":null,"action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"A","id":"i-\u0031","action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"Ä","id":"i","action":"Heartbeat"}]}`,
	`{"replicationList":[{"APPNAME":"A","id":"i","action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Heartbeat","extra":{"a":[1,2,"]"]}}]}`,
	`{"replicationList":[{"appName":"A","id":"i","lastDirtyTimestamp":1.5,"action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"A","id":"i","lastDirtyTimestamp":0123,"action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"A","id":"i","lastDirtyTimestamp":"x","action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"A","id":"i","lastDirtyTimestamp":99999999999999999999,"action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":5,"id":"i","action":"Heartbeat"}]}`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Register","instanceInfo":{"instanceId":"i","app":"A","hostName":"h","ipAddr":"1.2.3.4","status":"UP"}}]}`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Register","instanceInfo":null}]}`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Register","instanceInfo":{"a":}}]}`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Heartbeat"},]}`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Heartbeat"}]`,
	`{"replicationList":[{"appName":"A","id":"i","action":"Heartbeat"}]}x`,
	`{"replicationList":null}`,
	`{"other":1,"replicationList":[{"appName":"A"}]}`,
	`{"replicationList":[{"appName":"A"}],"replicationList":[]}`,
	`{"replicationList":[{"appName":"A","appName":"B"}]}`,
	`{"replicationList":[1,"x",null,[]]}`,
	`{"replicationList":[{}]}`,
	`{"replicationList":[{"appName":"A\tB"}]}`,
	`[]`,
	``,
}

func TestScanBatch_readsAsEncodingJSONDoes(t *testing.T) {
	fast := 0
	for _, s := range batchSeeds {
		if checkScanMatchesJSON(t, []byte(s)) {
			fast++
		}
	}
	if fast < 10 {
		t.Fatalf("scanBatch read only %d of %d seeds itself", fast, len(batchSeeds))
	}
	// What a Muster peer sends is read without encoding/json, every item.
	in := &registry.Instance{InstanceID: "i-1", App: "APP", HostName: "h", IPAddr: "10.0.0.1", Status: registry.StatusUp, LastDirtyTimestamp: 1718000000000}
	actions := []registry.Action{registry.ActionHeartbeat, registry.ActionRegister, registry.ActionStatusUpdate, registry.ActionCancel, registry.ActionDeleteStatusOverride}
	in.WriteVersion = 42
	for _, versioned := range []bool{false, true} {
		body, err := AppendBatch(nil, len(actions), func(i int) ReplicationItem {
			return ReplicationItemOf(actions[i], registry.InstanceKey{App: "APP", ID: "i-1"}, in, versioned)
		})
		if err != nil {
			t.Fatal(err)
		}
		if !checkScanMatchesJSON(t, body) {
			t.Fatalf("scanBatch did not read AppendBatch's output: %s", body)
		}
		b, _ := scanBatch(body)
		if b.viaJSON != 0 {
			t.Errorf("%d items (versioned %v) went to encoding/json", b.viaJSON, versioned)
		}
		for i, it := range b.Items {
			if versioned && it.Version != 42 {
				t.Errorf("item %d: version %d, want 42", i, it.Version)
			}
		}
	}
}

func FuzzScanBatch(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkScanMatchesJSON(t, body)
	})
}

// The fast path and encoding/json read the same items, and answer alike.
func TestDecodeBatch_fastAndSlowAlike(t *testing.T) {
	body := []byte(`{"replicationList":[` +
		`{"appName":"APP","id":"i-1","lastDirtyTimestamp":1718000000000,"status":"UP","action":"Heartbeat"},` +
		`{"appName":"APP","id":"i-2","lastDirtyTimestamp":1718000000001,"status":"UP","action":"Heartbeat"},` +
		`{"appName":"APP","id":"i-9","lastDirtyTimestamp":1718000000000,"status":"UP","action":"Heartbeat"},` +
		`{"appName":"APP","id":"i-1","lastDirtyTimestamp":"1718000000005","status":"OUT_OF_SERVICE","action":"StatusUpdate"},` +
		`{"appName":"APP","id":"i-2","action":"Cancel"},` +
		`{"appName":"APP","id":"i-1","action":"Nope"},` +
		`{"appName":7,"id":"i-1","action":"Heartbeat"}]}`)
	fast, err := DecodeBatch(body)
	if err != nil || fast.slow {
		t.Fatalf("DecodeBatch: slow %v, err %v", fast != nil && fast.slow, err)
	}
	slow, err := decodeBatchJSON(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(fast.Items) != len(slow.Items) {
		t.Fatalf("fast %d items, slow %d", len(fast.Items), len(slow.Items))
	}
	for i := range fast.Items {
		if (fast.Err(i) == nil) != (slow.Err(i) == nil) || fast.Err(i) == nil && !reflect.DeepEqual(fast.Items[i], slow.Items[i]) {
			t.Errorf("item %d: fast %+v (%v), slow %+v (%v)", i, fast.Items[i], fast.Err(i), slow.Items[i], slow.Err(i))
		}
	}
	resp := []ReplicationResponse{{StatusCode: 200}, {StatusCode: 409, ResponseEntity: []byte(`{"instanceId":"i-2"}`), Version: 3}, {StatusCode: 404}}
	fb, err1 := fast.EncodeResponse(resp)
	sb, err2 := slow.EncodeResponse(resp)
	var a, b any
	if err1 != nil || err2 != nil || json.Unmarshal(fb, &a) != nil || json.Unmarshal(sb, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("answers differ:\nfast %s\nslow %s", fb, sb)
	}
	if _, err := DecodeBatch([]byte(`{"replicationList":[{"appName":"A"},]}`)); err == nil {
		t.Error("a malformed body was accepted")
	}
}

// AppendBatch writes what encoding/json writes, up to escaping.
func TestAppendBatch_asEncodingJSON(t *testing.T) {
	dirty := FlexInt(1718000000000)
	items := []ReplicationItem{
		{AppName: "APP", ID: "i-1", LastDirtyTimestamp: &dirty, Status: "UP", Action: "Heartbeat"},
		{AppName: "APP", ID: "i-1", Action: "Cancel"},
		{AppName: "APP", ID: "i-1", LastDirtyTimestamp: &dirty, OverriddenStatus: "OUT_OF_SERVICE", Status: "UP", Action: "Heartbeat"},
		{AppName: "A<p>&\"q\"", ID: "é\t\\", Action: "StatusUpdate", Status: "DOWN"},
		{AppName: "APP", ID: "i-1", Action: "Register", InstanceInfo: json.RawMessage(`{"instanceId":"i-1","app":"APP"}`)},
		{AppName: "APP", ID: "i-1", Action: "Register", InstanceInfo: json.RawMessage{}},
	}
	for _, it := range items {
		got, err := appendItem(nil, &it)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(it)
		var g, w any
		if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Errorf("appendItem %s, encoding/json %s", got, want)
		}
	}
	bad := ReplicationItem{AppName: "APP", InstanceInfo: json.RawMessage(`{"a":`)}
	if _, err := appendItem(nil, &bad); err == nil {
		t.Error("invalid instanceInfo was written")
	}
}

// DecodeBatchResponse reads plain answers itself and the rest as before.
func TestDecodeBatchResponse_fastAndSlowAlike(t *testing.T) {
	for _, body := range []string{
		`{"responseList":[]}`,
		`{"responseList":[{"statusCode":200},{"statusCode":404} , {"statusCode":200}]}`,
		`{"responseList":[{"statusCode":200},{"statusCode":409,"responseEntity":{"instanceId":"i-1","app":"APP","hostName":"h","ipAddr":"1.2.3.4"}}]}`,
		`{"responseList":[{"statusCode":"200"}]}`,
	} {
		fast, ok := scanBatchResponse([]byte(body))
		items, err := DecodeBatchResponse([]byte(body))
		if err != nil {
			if ok {
				t.Errorf("%s: scanned, but encoding/json refuses it: %v", body, err)
			}
			continue
		}
		if ok && !reflect.DeepEqual(fast, items) {
			t.Errorf("%s: scanned %+v, decoded %+v", body, fast, items)
		}
		var resp replicationListResponse
		if json.Unmarshal([]byte(body), &resp) != nil || len(resp.ResponseList) != len(items) {
			t.Errorf("%s: %d items, encoding/json %d", body, len(items), len(resp.ResponseList))
		}
	}
}

// appendBatchResponse writes every field of ReplicationResponse: each is
// set here by reflection, so a new one fails this test until it is added.
func TestAppendBatchResponse_writesEveryField(t *testing.T) {
	var r ReplicationResponse
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(409)
		case reflect.Uint64:
			f.SetUint(7)
		case reflect.Slice:
			f.SetBytes([]byte(`{"instanceId":"i-1"}`))
		case reflect.String:
			f.SetString("x")
		case reflect.Pointer:
			switch f.Type() {
			case reflect.TypeFor[*Health]():
				f.Set(reflect.ValueOf(&Health{Reason: "http 503", Since: 5, By: "n1", Hides: true}))
			case reflect.TypeFor[*Pieces]():
				f.Set(reflect.ValueOf(&Pieces{Override: "OUT_OF_SERVICE", OverrideVersion: 9}))
			default:
				t.Fatalf("field %s of type %s: teach this test and appendBatchResponse", v.Type().Field(i).Name, f.Type())
			}
		default:
			t.Fatalf("field %s of kind %s: teach this test and appendBatchResponse", v.Type().Field(i).Name, f.Kind())
		}
	}
	got := appendBatchResponse(nil, []ReplicationResponse{r})
	want, _ := json.Marshal(replicationListResponse{ResponseList: []ReplicationResponse{r}})
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
		t.Fatalf("appendBatchResponse %s, encoding/json %s", got, want)
	}
}

// appendItem's plain path (no instanceInfo, health or pieces) writes every
// other field of ReplicationItem, byte for byte as encoding/json: each is
// set here by reflection, so a field added to the struct fails this test
// until appendItem writes it.
func TestAppendItem_plainWritesEveryField(t *testing.T) {
	var it ReplicationItem
	v := reflect.ValueOf(&it).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch name := v.Type().Field(i).Name; {
		case name == "InstanceInfo" || name == "Health" || name == "Pieces":
			continue // the reflective path's
		case f.Kind() == reflect.String:
			f.SetString("v-" + name)
		case f.Kind() >= reflect.Int && f.Kind() <= reflect.Int64:
			f.SetInt(int64(1000 + i))
		case f.Kind() >= reflect.Uint && f.Kind() <= reflect.Uint64:
			f.SetUint(uint64(1000 + i))
		case f.Type() == reflect.TypeFor[*FlexInt]():
			n := FlexInt(1718000000000)
			f.Set(reflect.ValueOf(&n))
		default:
			t.Fatalf("field %s of kind %s: teach appendItem's plain path (and this test) to write it", name, f.Kind())
		}
	}
	for _, it := range []ReplicationItem{it, {AppName: "APP", ID: "i-1", Action: "Cancel"}} {
		got, err := appendItem(nil, &it)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(it)
		if string(got) != string(want) {
			t.Errorf("appendItem %s\nencoding/json %s", got, want)
		}
		refl, err := appendItemReflect(nil, &it)
		if err != nil || string(refl) != string(want) {
			t.Errorf("appendItemReflect %s (%v)\nencoding/json %s", refl, err, want)
		}
	}
}

// BenchmarkDecodeBatch reads a batch of 2,000 heartbeats as a Muster peer
// sends them (with write versions): the receiver's decoding per batch.
func BenchmarkDecodeBatch(b *testing.B) {
	var body []byte
	body = append(body, `{"replicationList":[`...)
	for i := range 2000 {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"appName":"SPRING-APP-%04d","id":"host-%05d.eu-west-1.compute.internal:spring-app-%04d:8080","lastDirtyTimestamp":1718000000%03d,"status":"UP","action":"Heartbeat","version":17180000000%05d}`, i/50, i, i/50, i%1000, i)
	}
	body = append(body, "]}"...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		batch, err := DecodeBatch(body)
		if err != nil || batch.slow || len(batch.Items) != 2000 {
			b.Fatalf("DecodeBatch: %v (slow %v)", err, batch != nil && batch.slow)
		}
		batch.Release()
	}
}

// plainStops flags, as its lowest flagged byte, the first byte of a word
// that PlainString's byte loop stops at, and nothing in a word it passes:
// every byte value at every position, after plain bytes and before any.
func TestPlainStops_firstFlaggedIsWhereTheByteLoopStops(t *testing.T) {
	stops := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c > 0x7e }
	for _, after := range []byte{'a', 0x00, 0xff, '"', 0x7f} {
		for pos := range 8 {
			for c := range 256 {
				w := []byte("abcdefgh")
				w[pos] = byte(c)
				for i := pos + 1; i < 8; i++ {
					w[i] = after
				}
				want := -1
				for i, b := range w {
					if stops(b) {
						want = i
						break
					}
				}
				flagged := plainStops(binary.LittleEndian.Uint64(w))
				got := -1
				if flagged != 0 {
					got = bits.TrailingZeros64(flagged) / 8
				}
				if got != want {
					t.Fatalf("%q: first flagged byte %d, want %d", w, got, want)
				}
			}
		}
	}
}
