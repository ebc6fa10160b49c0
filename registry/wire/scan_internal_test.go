package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

var extentCases = []string{
	`{}`, `[]`, `""`, `0`, `-12`, `1.5e3`, `true`, `null`,
	`{"a":[1,2,{"b":"c"}],"d":"}\"]"}`,
	`"esc \\ \" \u00e9 end"`,
	`[[[[[[[[[[[[]]]]]]]]]]]]`,
	`{"s":"a\\"}`,
}

// TestExtent_resumes: fed a byte at a time, as a stream may deliver it,
// extent ends each value where it ends when given the whole value, and
// where encoding/json's decoder says it ends.
func TestExtent_resumes(t *testing.T) {
	for _, v := range extentCases {
		doc := v + ` , "next"`
		var whole extent
		n, ok := whole.scan([]byte(doc), true)
		if !ok || n != len(v) {
			t.Errorf("extent of %q in one piece = %d, %v; want %d", v, n, ok, len(v))
		}
		var e extent
		got := -1
		for i := 0; i <= len(doc); i++ {
			if n, ok := e.scan([]byte(doc[:i]), true); ok {
				got = n
				break
			}
		}
		if got != len(v) {
			t.Errorf("extent of %q a byte at a time = %d, want %d", v, got, len(v))
		}
		d := json.NewDecoder(strings.NewReader(doc))
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil || int(d.InputOffset()) != len(v) {
			t.Errorf("encoding/json ends %q at %d (%v), want %d", v, d.InputOffset(), err, len(v))
		}
	}
}

// TestExtent_scalarAtEndOfInput: only the end of the input ends a number
// that nothing follows.
func TestExtent_scalarAtEndOfInput(t *testing.T) {
	var e extent
	if _, ok := e.scan([]byte("123"), true); ok {
		t.Fatal("a number at the end of the buffer ended while more may come")
	}
	if n, ok := e.scan([]byte("123"), false); !ok || n != 3 {
		t.Fatalf("scan at the end of input = %d, %v; want 3, true", n, ok)
	}
	var s extent
	if _, ok := s.scan([]byte(`"abc`), false); ok {
		t.Fatal("an unterminated string ended")
	}
}

func TestScanner_tokens(t *testing.T) {
	sc := NewScanner([]byte(` { "replicationList" : [ 12 , -0 , "x" , null , {"a":[1]} ] } `))
	if !sc.Byte('{') || !sc.Key("replicationList") || !sc.Byte('[') {
		t.Fatal("prefix not read")
	}
	if n, ok := sc.Integer(); !ok || string(n) != "12" || !sc.Byte(',') {
		t.Fatalf("Integer = %q, %v", n, ok)
	}
	if n, ok := sc.Integer(); !ok || string(n) != "-0" || !sc.Byte(',') {
		t.Fatalf("Integer = %q, %v", n, ok)
	}
	if s, ok := sc.PlainString(); !ok || string(s) != "x" || !sc.Byte(',') {
		t.Fatalf("PlainString = %q, %v", s, ok)
	}
	if !sc.Literal("null") || !sc.Byte(',') {
		t.Fatal("null not read")
	}
	if raw, ok := sc.SkipValue(); !ok || string(raw) != `{"a":[1]}` {
		t.Fatalf("SkipValue = %q, %v", raw, ok)
	}
	if !sc.Byte(']') || !sc.Byte('}') || !sc.AtEnd() {
		t.Fatal("suffix not read")
	}
	for _, refused := range []string{`01`, `1.5`, `2e3`, `-`, `"a\"b"`, `"é"`} {
		sc := NewScanner([]byte(refused))
		_, intOK := sc.Integer()
		sc.Seek(0)
		_, strOK := sc.PlainString()
		if intOK || strOK {
			t.Errorf("%s read as an integer (%v) or a plain string (%v)", refused, intOK, strOK)
		}
	}
	blank := NewScanner([]byte(`  `))
	if _, ok := blank.SkipValue(); ok {
		t.Error("SkipValue read a value from white space")
	}
}
