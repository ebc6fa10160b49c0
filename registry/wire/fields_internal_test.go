package wire

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/muster-registry/muster/registry"
)

// Each entry of the field tables points at a field of the type its kind
// stores, and no two names share a field unless they are spellings of one
// (a wrong entry would otherwise panic on the first body that sends it).
func TestFieldTables_pointAtFieldsOfTheirKind(t *testing.T) {
	want := map[fieldKind]reflect.Type{
		fieldText:       reflect.TypeFor[*string](),
		fieldStatus:     reflect.TypeFor[*registry.Status](),
		fieldActionType: reflect.TypeFor[*registry.ActionType](),
		fieldBool:       reflect.TypeFor[*bool](),
		fieldInt32:      reflect.TypeFor[*int](),
		fieldInt64:      reflect.TypeFor[*int64](),
		fieldPort:       reflect.TypeFor[*registry.Port](),
		fieldSecurePort: reflect.TypeFor[*registry.Port](),
		fieldDataCenter: reflect.TypeFor[*registry.DataCenterInfo](),
	}
	spellings := map[string]string{"overriddenstatus": "overriddenStatus", "renewalTimestamp": "lastRenewalTimestamp"}
	in := &registry.Instance{}
	owner := map[any]string{}
	for tabName, tab := range map[string]*fieldTable{"instanceFields": instanceFields, "leaseFields": leaseFields} {
		for name, f := range tab.byName {
			typ, stored := want[f.kind]
			if !stored {
				if f.at != nil {
					t.Errorf("%s[%q]: kind %d is not stored in the instance, but the entry has at", tabName, name, f.kind)
				}
				continue
			}
			p := f.at(in)
			if reflect.TypeOf(p) != typ {
				t.Errorf("%s[%q]: at gives %T, kind %d stores %s", tabName, name, p, f.kind, typ)
				continue
			}
			key := fmt.Sprintf("%p", p)
			if other, dup := owner[key]; dup && spellings[name] != other && spellings[other] != name {
				t.Errorf("%s[%q] and %q store into the same field", tabName, name, other)
			}
			owner[key] = name
		}
	}
}

// Every name in the tables decodes, in JSON and in XML, to the same
// instance, and one that differs from an instance without the field: one
// table drives both formats.
func TestFieldTables_jsonAndXMLDecodeEveryFieldAlike(t *testing.T) {
	type sample struct{ json, xml string }
	byKind := map[fieldKind]func(name string) sample{
		fieldText:       func(n string) sample { return sample{`"v-` + n + `"`, `v-` + n} },
		fieldStatus:     func(string) sample { return sample{`"OUT_OF_SERVICE"`, `OUT_OF_SERVICE`} },
		fieldActionType: func(string) sample { return sample{`"MODIFIED"`, `MODIFIED`} },
		fieldBool:       func(string) sample { return sample{`true`, `true`} },
		fieldInt32:      func(string) sample { return sample{`4242`, `4242`} },
		fieldInt64:      func(string) sample { return sample{`1718000000123`, `1718000000123`} },
		fieldLastRenewal: func(string) sample {
			return sample{`1718000000456`, `1718000000456`}
		},
		fieldMetadata: func(string) sample { return sample{`{"k":"v"}`, `<k>v</k>`} },
	}
	elem := func(name, attrs, body string) string { return "<" + name + attrs + ">" + body + "</" + name + ">" }
	type body struct{ json, xml string }
	bodies := map[string]body{}
	for name, f := range instanceFields.byName {
		var b body
		switch f.kind {
		case fieldPort:
			b = body{`{"port":{"$":4243,"@enabled":"false"}}`, elem("instance", "", elem("port", ` enabled="false"`, "4243"))}
		case fieldSecurePort:
			b = body{`{"securePort":{"$":4244,"@enabled":"true"}}`, elem("instance", "", elem("securePort", ` enabled="true"`, "4244"))}
		case fieldDataCenter:
			b = body{`{"dataCenterInfo":{"@class":"c","name":"Amazon","metadata":{"k":"v"}}}`,
				elem("instance", "", elem("dataCenterInfo", ` class="c"`, elem("name", "", "Amazon")+elem("metadata", "", elem("k", "", "v"))))}
		case fieldLeaseInfo:
			continue // its fields are below
		default:
			s := byKind[f.kind](name)
			b = body{`{"` + name + `":` + s.json + `}`, elem("instance", "", elem(name, "", s.xml))}
		}
		bodies[name] = b
	}
	for name, f := range leaseFields.byName {
		s := byKind[f.kind](name)
		bodies["leaseInfo."+name] = body{`{"leaseInfo":{"` + name + `":` + s.json + `}}`,
			elem("instance", "", elem("leaseInfo", "", elem(name, "", s.xml)))}
	}
	if len(bodies) != len(instanceFields.byName)-1+len(leaseFields.byName) {
		t.Fatalf("%d bodies for %d fields", len(bodies), len(instanceFields.byName)-1+len(leaseFields.byName))
	}

	empty, emptyRenewal := decodeBoth(t, "none", `{}`, `<instance></instance>`)
	for name, b := range bodies {
		in, lastRenewal := decodeBoth(t, name, b.json, b.xml)
		if reflect.DeepEqual(in, empty) && lastRenewal == emptyRenewal {
			t.Errorf("%s: decoding it changed nothing", name)
		}
	}
}

// decodeBoth decodes one instance from JSON and from XML and fails unless
// both give the same.
func decodeBoth(t *testing.T, name, jsonBody, xmlBody string) (*registry.Instance, int64) {
	t.Helper()
	jin, jrenew, err := newJSONReader([]byte(jsonBody)).instance()
	if err != nil {
		t.Fatalf("%s: JSON %s: %v", name, jsonBody, err)
	}
	x := newXMLReader([]byte(xmlBody))
	if _, err := x.root(); err != nil {
		t.Fatalf("%s: XML %s: %v", name, xmlBody, err)
	}
	xin, xrenew, err := x.instance()
	if err != nil {
		t.Fatalf("%s: XML %s: %v", name, xmlBody, err)
	}
	if !reflect.DeepEqual(jin, xin) || jrenew != xrenew {
		t.Errorf("%s: JSON and XML differ:\nJSON %s → %+v, %d\nXML  %s → %+v, %d", name, jsonBody, jin, jrenew, xmlBody, xin, xrenew)
	}
	return jin, jrenew
}
