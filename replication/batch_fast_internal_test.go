package replication

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/rs/zerolog"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// slowItems reads body the way handleSlow does: per item, the decoded item
// or nil when encoding/json refuses it; err when the body as a whole is
// refused.
func slowItems(body []byte) ([]*replicationItem, error) {
	var list struct {
		ReplicationList []json.RawMessage `json:"replicationList"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	if list.ReplicationList == nil {
		return nil, ErrMalformedBatch
	}
	out := make([]*replicationItem, len(list.ReplicationList))
	for i, raw := range list.ReplicationList {
		var it replicationItem
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
	items, ok := scanBatch(body)
	want, err := slowItems(body)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("scanBatch read a body encoding/json refuses (%v): %q", err, body)
	}
	if len(items) != len(want) {
		t.Fatalf("scanBatch found %d items, encoding/json %d: %q", len(items), len(want), body)
	}
	for i := range items {
		got := &items[i].it
		if raw := items[i].raw; raw != nil {
			var it replicationItem
			if json.Unmarshal(raw, &it) != nil {
				got = nil
			} else {
				got = &it
			}
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
	var b Batch
	for _, a := range []registry.Action{registry.ActionHeartbeat, registry.ActionRegister, registry.ActionStatusUpdate, registry.ActionCancel, registry.ActionDeleteStatusOverride} {
		b.Tasks = append(b.Tasks, Task{Action: a, Key: registry.InstanceKey{App: "APP", ID: "i-1"}, Instance: in})
	}
	in.WriteVersion = 42
	for _, versioned := range []bool{false, true} {
		b.Versioned = versioned
		body, err := EncodeBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !checkScanMatchesJSON(t, body) {
			t.Fatalf("scanBatch did not read EncodeBatch's output: %s", body)
		}
		items, _ := scanBatch(body)
		for i, it := range items {
			if it.raw != nil {
				t.Errorf("item %d (%s, versioned %v) went to encoding/json", i, b.Tasks[i].Action, versioned)
			}
			if versioned && it.it.Version != 42 {
				t.Errorf("item %d: version %d, want 42", i, it.it.Version)
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

// The fast path and encoding/json give the same answers and leave the
// same registry.
func TestReceiver_Handle_fastAndSlowAnswerAlike(t *testing.T) {
	clock := registrytest.NewClock()
	newReg := func() *registry.Registry {
		cfg := registry.DefaultConfig()
		cfg.Now = clock.Now
		reg, err := registry.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"i-1", "i-2"} {
			in := registrytest.NewInstance("APP", id, registrytest.WithDirty(1718000000000))
			if _, err := reg.Apply(registry.RegisterOp(in)); err != nil {
				t.Fatal(err)
			}
		}
		return reg
	}
	body := []byte(`{"replicationList":[` +
		`{"appName":"APP","id":"i-1","lastDirtyTimestamp":1718000000000,"status":"UP","action":"Heartbeat"},` +
		`{"appName":"APP","id":"i-2","lastDirtyTimestamp":1718000000001,"status":"UP","action":"Heartbeat"},` +
		`{"appName":"APP","id":"i-9","lastDirtyTimestamp":1718000000000,"status":"UP","action":"Heartbeat"},` +
		`{"appName":"APP","id":"i-1","lastDirtyTimestamp":"1718000000005","status":"OUT_OF_SERVICE","action":"StatusUpdate"},` +
		`{"appName":"APP","id":"i-2","action":"Cancel"},` +
		`{"appName":"APP","id":"i-1","action":"Nope"},` +
		`{"appName":7,"id":"i-1","action":"Heartbeat"}]}`)
	fastReg, slowReg := newReg(), newReg()
	fastRC, _ := NewReceiver(fastReg, zerolog.New(zerolog.NewTestWriter(t)))
	slowRC, _ := NewReceiver(slowReg, zerolog.New(zerolog.NewTestWriter(t)))
	fast, err := fastRC.Handle(body)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := slowRC.handleSlow(body)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(fast, &a) != nil || json.Unmarshal(slow, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("answers differ:\nfast %s\nslow %s", fast, slow)
	}
	for _, id := range []string{"i-1", "i-2"} {
		f, fok := fastReg.Instance("APP", id)
		s, sok := slowReg.Instance("APP", id)
		if fok != sok || fok && (f.Status != s.Status || f.LastDirtyTimestamp != s.LastDirtyTimestamp) {
			t.Errorf("%s: fast %v %+v, slow %v %+v", id, fok, f.Instance, sok, s.Instance)
		}
	}
	if _, err := fastRC.Handle([]byte(`{"replicationList":[{"appName":"A"},]}`)); err == nil {
		t.Error("a malformed body was accepted")
	}
}

// EncodeBatch writes what encoding/json writes, up to escaping.
func TestEncodeBatch_asEncodingJSON(t *testing.T) {
	dirty := flexInt(1718000000000)
	items := []replicationItem{
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
	bad := replicationItem{AppName: "APP", InstanceInfo: json.RawMessage(`{"a":`)}
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
		res, err := DecodeBatchResponse([]byte(body))
		if err != nil {
			if ok {
				t.Errorf("%s: scanned, but encoding/json refuses it: %v", body, err)
			}
			continue
		}
		if ok && !reflect.DeepEqual(fast, res.Items) {
			t.Errorf("%s: scanned %+v, decoded %+v", body, fast, res.Items)
		}
		var resp replicationListResponse
		if json.Unmarshal([]byte(body), &resp) != nil || len(resp.ResponseList) != len(res.Items) {
			t.Errorf("%s: %d items, encoding/json %d", body, len(res.Items), len(resp.ResponseList))
		}
	}
}

// appendBatchResponse writes every field of replicationResponse: each is
// set here by reflection, so a new one fails this test until it is added.
func TestAppendBatchResponse_writesEveryField(t *testing.T) {
	var r replicationResponse
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
			case reflect.TypeFor[*wireHealth]():
				f.Set(reflect.ValueOf(&wireHealth{Reason: "http 503", Since: 5, By: "n1", Hides: true}))
			case reflect.TypeFor[*wire.Pieces]():
				f.Set(reflect.ValueOf(&wire.Pieces{Override: "OUT_OF_SERVICE", OverrideVersion: 9}))
			default:
				t.Fatalf("field %s of type %s: teach this test and appendBatchResponse", v.Type().Field(i).Name, f.Type())
			}
		default:
			t.Fatalf("field %s of kind %s: teach this test and appendBatchResponse", v.Type().Field(i).Name, f.Kind())
		}
	}
	got := appendBatchResponse(nil, []replicationResponse{r})
	want, _ := json.Marshal(replicationListResponse{ResponseList: []replicationResponse{r}})
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
		t.Fatalf("appendBatchResponse %s, encoding/json %s", got, want)
	}
}
