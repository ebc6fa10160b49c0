package wire

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/muster-registry/muster/registry"
)

var escapeCases = []string{
	"",
	"plain ascii host-a.example.com:8080",
	"exactly8",
	"sixteen-bytes-ok",
	`quote " here`,
	`back\slash`,
	"ctrl\x00\x01\x1f\x7f",
	"tab\tnl\ncr\rbs\bff\f",
	"<html>&amp;</html>",
	"ünïcödé 例え 😀",
	"\u2028\u2029",
	"bad\xffutf8\xc3",
	"\xed\xa0\x80 surrogate",
	"\uFFFE\uFFFF",
	"apos ' and \"",
	strings.Repeat("long-plain-", 20) + `"` + strings.Repeat("x", 9),
}

// TestAppendJSONString_matchesEncodingJSON: our escaping must decode to
// what encoding/json decodes its own to (both turn invalid UTF-8 into
// U+FFFD), and leave '<', '>', '&' literal as Jackson does.
func TestAppendJSONString_matchesEncodingJSON(t *testing.T) {
	for _, s := range escapeCases {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendJSONString(%q) = %s, not valid JSON: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("appendJSONString(%q) decodes to %q, want %q", s, back, wantBack)
		}
	}
	if got := string(appendJSONString(nil, "<a&b>/")); got != `"<a&b>/"` {
		t.Errorf(`appendJSONString("<a&b>/") = %s, want "<a&b>/"`, got)
	}
	if got := string(appendJSONString(nil, "\x01\n")); got != `"\u0001\n"` {
		t.Errorf(`appendJSONString("\x01\n") = %s, want "\u0001\n"`, got)
	}
}

func TestPlainJSONPrefix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"abcdefgh", 8},
		{"abcdefgh\"", 8},
		{"abcdefghijklmnop", 16},
		{"abcdefg\x1f", 7},
		{"\x7fabcdefg", 8}, // DEL is plain in JSON
		{"abc\\defghijk", 3},
		{"abcdefghijk\xc3\xa9", 11},
		{" !#$%&'()*+,-./0123456789:;<=>?@AZ[]^_`az{|}~", 45},
	} {
		if got := plainJSONPrefix(tc.s); got != tc.want {
			t.Errorf("plainJSONPrefix(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
	// Every single special byte at every position of a 24-byte string.
	for pos := 0; pos < 24; pos++ {
		for c := 0; c < 256; c++ {
			b := bytes.Repeat([]byte("a"), 24)
			b[pos] = byte(c)
			want := 24
			if !jsonPlain[c] {
				want = pos
			}
			if got := plainJSONPrefix(string(b)); got != want {
				t.Fatalf("plainJSONPrefix with byte %#x at %d = %d, want %d", c, pos, got, want)
			}
		}
	}
}

func TestPlainXMLPrefix(t *testing.T) {
	for pos := 0; pos < 24; pos++ {
		for c := 0; c < 256; c++ {
			b := bytes.Repeat([]byte("a"), 24)
			b[pos] = byte(c)
			want := 24
			if !xmlPlain[c] {
				want = pos
			}
			if got := plainXMLPrefix(string(b)); got != want {
				t.Fatalf("plainXMLPrefix with byte %#x at %d = %d, want %d", c, pos, got, want)
			}
		}
	}
}

// TestAppendXMLText_wellFormed: whatever the input, the text parses, and
// reads back as the input with only XML-forbidden characters replaced.
func TestAppendXMLText_wellFormed(t *testing.T) {
	for _, s := range escapeCases {
		for _, attr := range []bool{false, true} {
			var doc []byte
			if attr {
				doc = append([]byte(`<a v="`), appendXMLText(nil, s, true)...)
				doc = append(doc, `"/>`...)
			} else {
				doc = append([]byte("<a>"), appendXMLText(nil, s, false)...)
				doc = append(doc, "</a>"...)
			}
			var v struct {
				V    string `xml:"v,attr"`
				Text string `xml:",chardata"`
			}
			if err := xml.Unmarshal(doc, &v); err != nil {
				t.Errorf("appendXMLText(%q, %v) = %s, not well-formed: %v", s, attr, doc, err)
				continue
			}
			got := v.Text
			if attr {
				got = v.V
			}
			if want := xmlSafe(s); got != want {
				t.Errorf("appendXMLText(%q, %v) reads back as %q, want %q", s, attr, got, want)
			}
		}
	}
}

// xmlSafe is s with what XML 1.0 cannot carry replaced by U+FFFD.
func xmlSafe(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF:
			sb.WriteRune(utf8.RuneError)
		default:
			sb.WriteString(s[i : i+size])
		}
		i += size
	}
	return sb.String()
}

func TestAppendXMLName(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"zone", "zone"},
		{"management.port", "management.port"},
		{"instance-id", "instance-id"},
		{"git_commit", "git__commit"},
		{"$x_y", "_-x__y"},
		{"8080", "_.0038080"},
		{"-a", "_.002da"},
		{".a", "_.002ea"},
		{"a b", "a_.0020b"},
		{"ns:key", "ns_.003akey"},
		{"é", "_.00e9"},
		{"😀", "_.d83d_.de00"},
		{"a\xffb", "a_.fffdb"},
	} {
		got := string(appendXMLName(nil, tc.key))
		if got != tc.want {
			t.Errorf("appendXMLName(%q) = %q, want %q", tc.key, got, tc.want)
		}
		var v struct {
			XMLName xml.Name
		}
		if err := xml.Unmarshal([]byte("<"+got+"/>"), &v); err != nil || v.XMLName.Local != got {
			t.Errorf("appendXMLName(%q) = %q is not an XML name: %v", tc.key, got, err)
		}
		back := decodeXMLName(got)
		if want := strings.ToValidUTF8(tc.key, "\uFFFD"); back != want {
			t.Errorf("decodeXMLName(%q) = %q, want %q", got, back, want)
		}
	}
}

func TestDecodeXMLName_xstream(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"versions__delta", "versions_delta"},
		{"_-dollar", "$dollar"},
		{"a_b", "a_b"},           // a lone '_' stays
		{"a_.zzzzb", "a_.zzzzb"}, // not hex: stays
		{"_.00", "_.00"},         // too short: stays
		{"_.D83D_.DE00", "😀"},
		{"_.d83d", "\uFFFD"}, // a lone surrogate
		{"trailing_", "trailing_"},
	} {
		if got := decodeXMLName(tc.name); got != tc.want {
			t.Errorf("decodeXMLName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestEstimateApps_closeAbove: the size estimate must cover the output, so
// that an encode into an empty buffer allocates once, without wasting much.
func TestEstimateApps_closeAbove(t *testing.T) {
	var apps []registry.AppView
	for a := 0; a < 5; a++ {
		app := registry.AppView{Name: fmt.Sprintf("APP-%d", a)}
		for i := 0; i < 20; i++ {
			host := fmt.Sprintf("host-%d-%d.example.internal", a, i)
			in := &registry.Instance{
				InstanceID: host + ":app:8080", HostName: host, App: app.Name, IPAddr: "10.0.0.1",
				Status: registry.StatusUp, OverriddenStatus: registry.StatusUnknown,
				Port: registry.Port{Number: 8080, Enabled: true}, SecurePort: registry.Port{Number: 443}, CountryID: 1,
				DataCenterInfo: registry.DataCenterInfo{Name: "MyOwn"},
				Metadata:       registry.Metadata{{Key: "management.port", Value: "8081"}, {Key: "zone", Value: "a"}},
				HomePageURL:    "http://" + host + ":8080/", StatusPageURL: "http://" + host + ":8080/info",
				HealthCheckURL: "http://" + host + ":8080/health", VIPAddress: "app", SecureVIPAddress: "app",
				LastUpdatedTimestamp: 1718000000000, LastDirtyTimestamp: 1718000000000, ActionType: registry.ActionAdded,
				RegistrationTimestamp: 1718000000000, ServiceUpTimestamp: 1718000000000,
			}
			if i%2 == 0 {
				in.AppGroupName, in.Sid, in.ASGName, in.SecureHealthCheckURL = "GROUP", "sid", "asg", "https://"+host+"/health"
				in.DataCenterInfo = registry.DataCenterInfo{Name: "Amazon", Metadata: registry.Metadata{{Key: "instance-id", Value: "i-1"}}}
			}
			app.Instances = append(app.Instances, registry.InstanceView{Instance: in, LastRenewalTimestamp: 1718000000000})
		}
		apps = append(apps, app)
	}
	for _, tc := range []struct {
		name string
		xml  bool
		out  []byte
	}{
		{"json", false, AppendApplicationsJSON(nil, apps, "1", "UP_100_")},
		{"xml", true, AppendApplicationsXML(nil, apps, "1", "UP_100_")},
	} {
		est := estimateApps(apps, tc.xml)
		if est < len(tc.out) || float64(est) > 1.2*float64(len(tc.out)) {
			t.Errorf("%s: estimate %d for %d bytes, want within [100%%, 120%%]", tc.name, est, len(tc.out))
		}
	}
}
