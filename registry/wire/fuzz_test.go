package wire_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The fuzz targets check that decoding never panics, that every error
// wraps ErrMalformed, that the JSON reader accepts nothing encoding/json
// calls invalid, and that what was decoded survives encoding: one
// encode/decode round normalises an instance (defaults, escaping), and a
// second round changes nothing. Run one with, e.g.,
//
//	go test -run '^$' -fuzz FuzzDecodeInstanceJSON -fuzztime 20s ./registry/wire/
//
// The targets are slowish (each success costs several encodes and
// decodes), so the fuzzer's minimisation of a new input can stall the exec
// counter for seconds; -fuzzminimizetime 2s shortens that.

func FuzzDecodeInstanceJSON(f *testing.F) {
	for _, s := range []string{springBody, fargoJSONBody, jsClientBody, fmt.Sprintf(baseJSON, ""),
		`{"instance":{"port":"abc"}}`, `{"instance":[]}`, `{"instance":{"metadata":{"k":"\ud83d\ude00","@class":"x"}}}`} {
		f.Add([]byte(s))
	}
	f.Add(mustReadFile(f, "instance.golden.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := wire.DecodeInstanceJSON(data)
		if err != nil {
			mustWrapMalformed(t, err)
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		encode := func(in *registry.Instance) []byte {
			return wire.AppendInstanceJSON(nil, registry.InstanceView{Instance: in})
		}
		mustStable(t, in, encode, wire.DecodeInstanceJSON)

		// The bare body decoder must agree with the wrapped one.
		body := wire.AppendInstanceBodyJSON(nil, registry.InstanceView{Instance: in})
		bare, err := wire.DecodeInstanceBodyJSON(body)
		if err != nil {
			t.Fatalf("DecodeInstanceBodyJSON(%s): %v", body, err)
		}
		wrapped, _ := wire.DecodeInstanceJSON(encode(in))
		if !reflect.DeepEqual(bare, wrapped) {
			t.Fatalf("bare and wrapped decodes differ:\n%+v\n%+v", bare, wrapped)
		}
	})
}

func FuzzDecodeInstanceXML(f *testing.F) {
	for _, s := range []string{fargoXMLBody, fargoAmazonXMLBody, fmt.Sprintf(baseXML, ""),
		`<instance><metadata><a__b>1</a__b><_.0038x>2</_.0038x></metadata></instance>`,
		`<?xml version="1.0"?><instance><port enabled="false">1</port></instance>`, `<instance><port>x</port></instance>`} {
		f.Add([]byte(s))
	}
	f.Add(mustReadFile(f, "instance.golden.xml"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := wire.DecodeInstanceXML(data)
		if err != nil {
			mustWrapMalformed(t, err)
			return
		}
		encode := func(in *registry.Instance) []byte {
			return wire.AppendInstanceXML(nil, registry.InstanceView{Instance: in})
		}
		mustStable(t, in, encode, wire.DecodeInstanceXML)
	})
}

func FuzzDecodeApplicationsJSON(f *testing.F) {
	for _, name := range []string{"full.golden.json", "delta.golden.json", "empty.golden.json", "app.golden.json"} {
		f.Add(mustReadFile(f, name))
	}
	f.Add([]byte(`{"applications":{"application":{"name":"A","instance":{"port":8080}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		apps, err := wire.DecodeApplicationsJSON(data)
		if err != nil {
			mustWrapMalformed(t, err)
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		round := func(a *wire.Applications) *wire.Applications {
			b := wire.AppendApplicationsJSON(nil, a.Apps, a.VersionsDelta, a.Hashcode)
			if !json.Valid(b) {
				t.Fatalf("encoded invalid JSON %s", b)
			}
			out, err := wire.DecodeApplicationsJSON(b)
			if err != nil {
				t.Fatalf("decoding our own output: %v\n%s", err, b)
			}
			return out
		}
		once := round(apps)
		if twice := round(once); !reflect.DeepEqual(once, twice) {
			t.Fatalf("second round changed the document:\n%+v\n%+v", once, twice)
		}
		// The XML encoding of the same document must be readable too.
		x := wire.AppendApplicationsXML(nil, once.Apps, once.VersionsDelta, once.Hashcode)
		if _, err := wire.DecodeApplicationsXML(x); err != nil {
			t.Fatalf("decoding our own XML: %v\n%s", err, x)
		}
	})
}

// mustStable checks that in survives encoding: the first round may
// normalise it, the second must not change it.
func mustStable(t *testing.T, in *registry.Instance, encode func(*registry.Instance) []byte,
	decode func([]byte) (*registry.Instance, error)) {
	t.Helper()
	round := func(in *registry.Instance) *registry.Instance {
		b := encode(in)
		out, err := decode(b)
		if err != nil {
			t.Fatalf("decoding our own output: %v\n%s", err, b)
		}
		return out
	}
	once := round(in)
	if twice := round(once); !reflect.DeepEqual(once, twice) {
		t.Fatalf("second round changed the instance:\n%+v\n%+v", once, twice)
	}
}

func mustWrapMalformed(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, wire.ErrMalformed) {
		t.Fatalf("error %v does not wrap ErrMalformed", err)
	}
}
