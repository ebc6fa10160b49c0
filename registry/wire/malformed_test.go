package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry/wire"
)

func TestDecodeInstanceJSON_malformed(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	deepArray := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"empty body", ``, "wire: malformed body: empty body"},
		{"white space only", " \n ", "wire: malformed body: empty body"},
		{"not JSON", `hello`, `wire: malformed body: invalid JSON at offset 0: unexpected 'h'`},
		{"truncated", `{"instance":{"hostName":"h","app":`, "wire: malformed body: invalid JSON at offset 34: unexpected end of input"},
		{"truncated string", `{"instance":{"hostName":"h`, "wire: malformed body: invalid JSON at offset 26: unexpected end of input in a string"},
		{"truncated literal", `{"instance":{"x":tru`, "wire: malformed body: invalid JSON at offset 20: unexpected end of input"},
		{"no wrapper", `{"hostName":"h","app":"a","ipAddr":"1.2.3.4"}`, `wire: malformed body: missing the "instance" wrapper (want {"instance":{…}})`},
		{"wrong root", `{"application":{"name":"A"}}`, `wire: malformed body: missing the "instance" wrapper (want {"instance":{…}})`},
		{"root is an array", `[{"instance":{}}]`, "wire: malformed body: want a JSON object, got an array"},
		{"root is a string", `"instance"`, "wire: malformed body: want a JSON object, got a string"},
		{"instance is an array", `{"instance":[{"hostName":"h"}]}`, "wire: malformed body: instance: want an object, got an array"},
		{"instance is null", `{"instance":null}`, "wire: malformed body: instance: want an object, got null"},
		{"instance is a string", `{"instance":"x"}`, "wire: malformed body: instance: want an object, got a string"},
		{"port not a number", `{"instance":{"port":"abc"}}`, `wire: malformed body: port: want a number, got "abc"`},
		{"port dollar not a number", `{"instance":{"port":{"$":"80a","@enabled":"true"}}}`, `wire: malformed body: port.$: want a number, got "80a"`},
		{"port too big", `{"instance":{"port":{"$":99999999999}}}`, `wire: malformed body: port.$: want a number, got 99999999999`},
		{"port is an array", `{"instance":{"port":[8080]}}`, `wire: malformed body: port: want a number, got an array`},
		{"port boolean", `{"instance":{"port":true}}`, `wire: malformed body: port: want a number, got true`},
		{"port fraction", `{"instance":{"securePort":{"$":443.5}}}`, `wire: malformed body: securePort.$: want a number, got 443.5`},
		{"enabled is an object", `{"instance":{"port":{"$":1,"@enabled":{}}}}`, `wire: malformed body: port.@enabled: want a boolean, got an object`},
		{"countryId text", `{"instance":{"countryId":"us"}}`, `wire: malformed body: countryId: want a number, got "us"`},
		{"timestamp text", `{"instance":{"lastDirtyTimestamp":"yesterday"}}`, `wire: malformed body: lastDirtyTimestamp: want a number, got "yesterday"`},
		{"leaseInfo is an array", `{"instance":{"leaseInfo":[]}}`, `wire: malformed body: leaseInfo: want an object, got an array`},
		{"leaseInfo field text", `{"instance":{"leaseInfo":{"durationInSecs":"long"}}}`, `wire: malformed body: leaseInfo.durationInSecs: want a number, got "long"`},
		{"hostName is an object", `{"instance":{"hostName":{"a":1}}}`, `wire: malformed body: hostName: want a string, got an object`},
		{"status is an array", `{"instance":{"status":["UP"]}}`, `wire: malformed body: status: want a string, got an array`},
		{"metadata is an array", `{"instance":{"metadata":["a"]}}`, `wire: malformed body: metadata: want an object, got an array`},
		{"metadata nested", `{"instance":{"metadata":{"k":{"x":1}}}}`, `wire: malformed body: metadata.k: want a string, got an object`},
		{"odd key quoted in path", `{"instance":{"metadata":{"a\nb":[]}}}`, `wire: malformed body: metadata."a\nb": want a string, got an array`},
		{"long key cut in path", `{"instance":{"metadata":{"` + strings.Repeat("k", 5000) + `":[]}}}`, `metadata."kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"…: want a string`},
		{"dataCenterInfo is a string", `{"instance":{"dataCenterInfo":"MyOwn"}}`, `wire: malformed body: dataCenterInfo: want an object, got a string`},
		{"unknown data center", `{"instance":{"dataCenterInfo":{"name":"Azure"}}}`, `wire: malformed body: dataCenterInfo.name: unknown data center "Azure" (want MyOwn, Netflix or Amazon)`},
		{"deeply nested junk", `{"instance":{"junk":` + deep + `}}`, "nested too deeply"},
		{"deeply nested arrays", `{"instance":{"junk":` + deepArray + `}}`, "nested too deeply"},
		{"trailing garbage", `{"instance":{}} x`, "wire: malformed body: invalid JSON at offset 16: unexpected data after the top-level value"},
		{"two documents", `{"instance":{}}{"instance":{}}`, "unexpected data after the top-level value"},
		{"missing colon", `{"instance" {}}`, `invalid JSON at offset 12: unexpected '{'`},
		{"trailing comma", `{"instance":{"app":"a",}}`, `invalid JSON at offset 23: unexpected '}'`},
		{"single quotes", `{'instance':{}}`, `unexpected '\''`},
		{"bad escape", `{"instance":{"app":"\x"}}`, `invalid escape "\\x"`},
		{"bad unicode escape", `{"instance":{"app":"\u12"}}`, `invalid \u escape`},
		{"control char in string", "{\"instance\":{\"app\":\"a\x01\"}}", "control character in string"},
		{"leading zero", `{"instance":{"countryId":01}}`, `unexpected '1'`},
		{"bare minus", `{"instance":{"countryId":-}}`, `unexpected '}'`},
		{"NaN", `{"instance":{"countryId":NaN}}`, `unexpected 'N'`},
		{"unclosed in skipped value", `{"instance":{"x":[1,2}}`, `unexpected '}'`},
		{"nul byte", "{\"instance\":\x00}", "unexpected byte 0x0"},
		{"error inside skipped junk", `{"instance":{"x":{"y":[tru]}}}`, `unexpected ']'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := wire.DecodeInstanceJSON([]byte(tc.body))
			mustMalformed(t, in, err, tc.wantErr)
		})
	}
}

func TestDecodeInstanceBodyJSON_malformed(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"empty", ``, "empty body"},
		{"array", `[]`, "want a JSON object, got an array"},
		{"null", `null`, "want a JSON object, got null"},
		{"truncated", `{"hostName":"h",`, "unexpected end of input"},
		{"port", `{"port":{"$":"x"}}`, `wire: malformed body: port.$: want a number, got "x"`},
		{"trailing", `{} []`, "unexpected data after the top-level value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := wire.DecodeInstanceBodyJSON([]byte(tc.body))
			mustMalformed(t, in, err, tc.wantErr)
		})
	}
}

func TestDecodeApplicationsJSON_malformed(t *testing.T) {
	inst := `{"hostName":"h","app":"a","ipAddr":"1.2.3.4"}`
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"empty", ``, "empty body"},
		{"wrong root", `{"instance":` + inst + `}`, `missing the "applications" wrapper`},
		{"applications is an array", `{"applications":[]}`, `wire: malformed body: applications: want an object, got an array`},
		{"application is a string", `{"applications":{"application":"A"}}`, `wire: malformed body: application: want an object or an array, got a string`},
		{"application element is a number", `{"applications":{"application":[{"name":"A"},3]}}`, `wire: malformed body: application[1]: want an object, got a number`},
		{"instance element is an array", `{"applications":{"application":[{"name":"A","instance":[[]]}]}}`, `wire: malformed body: application[0].instance[0]: want an object, got an array`},
		{"bad port deep inside", `{"applications":{"application":[{"name":"A"},{"name":"B","instance":[` + inst + `,{"port":{"$":"x"}}]}]}}`,
			`wire: malformed body: application[1].instance[1].port.$: want a number, got "x"`},
		{"bad port in single objects", `{"applications":{"application":{"name":"B","instance":{"port":"x"}}}}`,
			`wire: malformed body: application.instance.port: want a number, got "x"`},
		{"truncated", `{"applications":{"application":[{"name":"A","instance":[` + inst, "unexpected end of input"},
		{"versions__delta object", `{"applications":{"versions__delta":{}}}`, `wire: malformed body: versions__delta: want a string, got an object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apps, err := wire.DecodeApplicationsJSON([]byte(tc.body))
			mustMalformed(t, apps, err, tc.wantErr)
		})
	}
}

func TestDecodeInstanceXML_malformed(t *testing.T) {
	deep := strings.Repeat("<a>", 20000) + strings.Repeat("</a>", 20000)
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"empty", ``, "wire: malformed body: empty body"},
		{"white space", "  \n", "wire: malformed body: empty body"},
		{"garbage", `hello`, "wire: malformed body: invalid XML: text before the root element"},
		{"binary garbage", "\x00\x01\x02", "wire: malformed body: invalid XML"},
		{"JSON body", `{"instance":{}}`, "invalid XML: text before the root element"},
		{"wrong root", `<application><name>A</name></application>`, "wire: malformed body: root element <application>, want <instance>"},
		{"truncated", `<instance><hostName>h</host`, "wire: malformed body: invalid XML on line 1: unexpected end of input"},
		{"unclosed root", "<instance>\n<hostName>h</hostName>", "wire: malformed body: invalid XML on line 2: unexpected end of input"},
		{"mismatched tags", `<instance><hostName>h</ipAddr></instance>`, "wire: malformed body: invalid XML on line 1: element <hostName> closed by </ipAddr>"},
		{"port not a number", `<instance><port enabled="true">abc</port></instance>`, `wire: malformed body: port: want a number, got "abc"`},
		{"port too big", `<instance><securePort>70000000000</securePort></instance>`, `wire: malformed body: securePort: want a number, got "70000000000"`},
		{"element inside text", `<instance><hostName>h<b>x</b></hostName></instance>`, "wire: malformed body: hostName: want text, got element <b>"},
		{"element inside metadata value", `<instance><metadata><k><v/></k></metadata></instance>`, "wire: malformed body: metadata.k: want text, got element <v>"},
		{"lease text", `<instance><leaseInfo><durationInSecs>long</durationInSecs></leaseInfo></instance>`, `wire: malformed body: leaseInfo.durationInSecs: want a number, got "long"`},
		{"unknown data center", `<instance><dataCenterInfo><name>Azure</name></dataCenterInfo></instance>`, `wire: malformed body: dataCenterInfo.name: unknown data center "Azure" (want MyOwn, Netflix or Amazon)`},
		{"unknown entity", `<instance><hostName>&nbsp;</hostName></instance>`, "invalid XML"},
		{"entity declaration not expanded", `<!DOCTYPE i [<!ENTITY x "boom">]><instance><hostName>&x;</hostName></instance>`, "invalid XML"},
		{"second root", `<instance></instance><instance></instance>`, "wire: malformed body: invalid XML: a second root element <instance>"},
		{"text after root", `<instance></instance>junk`, "wire: malformed body: invalid XML: text after the root element"},
		{"invalid UTF-8", "<instance><hostName>\xff</hostName></instance>", "invalid XML"},
		{"illegal character", "<instance><hostName>\x01</hostName></instance>", "invalid XML"},
		{"deeply nested junk", `<instance><junk>` + deep + `</junk></instance>`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := wire.DecodeInstanceXML([]byte(tc.body))
			if tc.wantErr == "" {
				// Deep nesting in an unknown element is skipped without
				// recursion; it is not an error.
				if err != nil {
					t.Fatalf("DecodeInstanceXML: %v", err)
				}
				return
			}
			mustMalformed(t, in, err, tc.wantErr)
		})
	}
}

func TestDecodeApplicationsXML_malformed(t *testing.T) {
	for _, tc := range []struct {
		name, body, wantErr string
	}{
		{"empty", ``, "empty body"},
		{"wrong root", `<instance></instance>`, "wire: malformed body: root element <instance>, want <applications>"},
		{"bad port deep inside", `<applications><application><name>A</name></application><application><name>B</name><instance></instance><instance><port>x</port></instance></application></applications>`,
			`wire: malformed body: application[1].instance[1].port: want a number, got "x"`},
		{"truncated", `<applications><application><name>A</name>`, "unexpected end of input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apps, err := wire.DecodeApplicationsXML([]byte(tc.body))
			mustMalformed(t, apps, err, tc.wantErr)
		})
	}
}

// mustMalformed checks that decoding failed with ErrMalformed and a message
// containing wantErr, and returned no value.
func mustMalformed[T any](t *testing.T, got *T, err error, wantErr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got %+v, want an error containing %q", got, wantErr)
	}
	if !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("error %v does not wrap ErrMalformed", err)
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Errorf("error = %v, want it to contain %q", err, wantErr)
	}
	if got != nil {
		t.Errorf("got %+v with the error, want nil", got)
	}
	if len(err.Error()) > 300 {
		t.Errorf("error message is %d bytes long, want a short one", len(err.Error()))
	}
}
