package wire_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

func TestDecodeApplicationsJSON_roundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		apps []registry.AppView
	}{
		{"full", fullApps()},
		{"delta", deltaApps()},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := wire.AppendApplicationsJSON(nil, tc.apps, "42", "UP_1_")
			got, err := wire.DecodeApplicationsJSON(b)
			if err != nil {
				t.Fatalf("DecodeApplicationsJSON: %v", err)
			}
			want := &wire.Applications{VersionsDelta: "42", Hashcode: "UP_1_", Apps: tc.apps}
			mustEqualApps(t, got, want)
		})
	}
}

func TestDecodeApplicationsXML_roundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		apps []registry.AppView
	}{
		{"full", fullApps()},
		{"delta", deltaApps()},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := wire.AppendApplicationsXML(nil, tc.apps, "42", "UP_1_")
			got, err := wire.DecodeApplicationsXML(b)
			if err != nil {
				t.Fatalf("DecodeApplicationsXML: %v", err)
			}
			want := &wire.Applications{VersionsDelta: "42", Hashcode: "UP_1_", Apps: tc.apps}
			mustEqualApps(t, got, want)
		})
	}
}

// TestDecodeApplicationsJSON_singleApplication reads GET /apps/{APP}
// output as a one-app document, in both formats.
func TestDecodeApplicationsJSON_singleApplication(t *testing.T) {
	app := fullApps()[0]
	want := &wire.Applications{Apps: []registry.AppView{app}}
	got, err := wire.DecodeApplicationsJSON(wire.AppendApplicationJSON(nil, app))
	if err != nil {
		t.Fatal(err)
	}
	mustEqualApps(t, got, want)
	got, err = wire.DecodeApplicationsXML(wire.AppendApplicationXML(nil, app))
	if err != nil {
		t.Fatal(err)
	}
	mustEqualApps(t, got, want)
}

func TestDecodeInstance_roundTrip(t *testing.T) {
	for _, in := range []*registry.Instance{instanceOrdersA(), instanceOrdersB(), instancePaymentsC(), oddInstance()} {
		iv := registry.InstanceView{Instance: in, LastRenewalTimestamp: 99}
		t.Run(in.ID()+"/json", func(t *testing.T) {
			got, err := wire.DecodeInstanceJSON(wire.AppendInstanceJSON(nil, iv))
			if err != nil {
				t.Fatal(err)
			}
			mustEqualInstance(t, got, in)
		})
		t.Run(in.ID()+"/body", func(t *testing.T) {
			got, err := wire.DecodeInstanceBodyJSON(wire.AppendInstanceBodyJSON(nil, iv))
			if err != nil {
				t.Fatal(err)
			}
			mustEqualInstance(t, got, in)
		})
		t.Run(in.ID()+"/xml", func(t *testing.T) {
			b := wire.AppendInstanceXML(nil, iv)
			got, err := wire.DecodeInstanceXML(b)
			if err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			// XML 1.0 cannot carry C0 controls other than tab, LF and CR.
			want := in.Clone()
			want.InstanceID = strings.ReplaceAll(want.InstanceID, "\x01", "\uFFFD")
			mustEqualInstance(t, got, want)
		})
	}
}

// oddInstance has text that needs escaping everywhere, and metadata keys
// that are not XML names.
func oddInstance() *registry.Instance {
	in := instanceOrdersA()
	in.InstanceID = "odd\"id\\with\tcontrol\x01and\u2028line"
	in.HostName = "höst-ä.例え.jp"
	in.HomePageURL = "http://h/?q=<script>&x='y'\r\n"
	in.AppGroupName = "GROUP_1"
	in.Metadata = registry.NewMetadata(map[string]string{
		"$dollar":        "d",
		"8080":           "starts with a digit",
		"a b":            "space",
		"ns:key":         "colon",
		"under_score":    "u",
		"-dash":          "leading dash",
		"ключ":           "cyrillic",
		"emoji😀":         "astral",
		"x_.0041":        "looks like an escape",
		"trailing_":      "t",
		"empty.value":    "",
		"multi\nline":    "v\tw",
		"amp&lt":         "a&b",
		"xml-ish<tag>":   "<tag/>",
		"quote\"apos'":   `"'`,
		"with/slash":     "/",
		"dot.first":      ".",
		"UPPER_lower_99": "ok",
	})
	return in
}

func mustEqualApps(t *testing.T, got, want *wire.Applications) {
	t.Helper()
	if got.VersionsDelta != want.VersionsDelta || got.Hashcode != want.Hashcode {
		t.Errorf("versions__delta, apps__hashcode = %q, %q, want %q, %q",
			got.VersionsDelta, got.Hashcode, want.VersionsDelta, want.Hashcode)
	}
	if len(got.Apps) != len(want.Apps) {
		t.Fatalf("got %d apps, want %d", len(got.Apps), len(want.Apps))
	}
	for i := range want.Apps {
		g, w := got.Apps[i], want.Apps[i]
		if g.Name != w.Name || len(g.Instances) != len(w.Instances) {
			t.Fatalf("app %d = %s with %d instances, want %s with %d", i, g.Name, len(g.Instances), w.Name, len(w.Instances))
		}
		for j := range w.Instances {
			if g.Instances[j].LastRenewalTimestamp != w.Instances[j].LastRenewalTimestamp {
				t.Errorf("app %s instance %d lastRenewalTimestamp = %d, want %d", w.Name, j,
					g.Instances[j].LastRenewalTimestamp, w.Instances[j].LastRenewalTimestamp)
			}
			mustEqualInstance(t, g.Instances[j].Instance, w.Instances[j].Instance)
		}
	}
}

func mustEqualInstance(t *testing.T, got, want *registry.Instance) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded instance differs:\ngot  %+v\nwant %+v", *got, *want)
	}
}
