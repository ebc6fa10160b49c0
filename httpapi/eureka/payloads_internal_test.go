package eureka

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// rawClient leaves gzip to the test and reuses its connections.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}

// docForm is a format (JSON or XML) and a form (full, or compact as a
// client with X-Eureka-Accept: compact is sent) of registry documents.
type docForm struct{ xml, compact bool }

var docForms = []docForm{{false, false}, {true, false}, {false, true}, {true, true}}

func (f docForm) String() string { return fmt.Sprintf("xml %v, compact %v", f.xml, f.compact) }

// fetchRaw GETs path and returns the body as sent (still compressed when
// gz) and whether it came gzip-encoded.
func fetchRaw(t *testing.T, n *testNode, path string, form docForm, gz bool) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.http.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	if form.xml {
		req.Header.Set("Accept", "application/xml")
	}
	if form.compact {
		req.Header.Set("X-Eureka-Accept", "compact")
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	if got := resp.Header.Get("Content-Encoding") == "gzip"; got != gz {
		t.Fatalf("GET %s: gzip %v, want %v", path, got, gz)
	}
	if !slices.Contains(resp.Header.Values("Vary"), "X-Eureka-Accept") {
		t.Fatalf("GET %s: Vary %q does not name X-Eureka-Accept", path, resp.Header.Values("Vary"))
	}
	if resp.ContentLength != int64(len(b)) {
		t.Fatalf("GET %s: Content-Length %d, body %d bytes", path, resp.ContentLength, len(b))
	}
	return b
}

func gunzipOrFail(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false) // one member: what Java's GZIPInputStream reads best
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zr.Read(make([]byte, 1)); err != io.EOF {
		t.Fatal("bytes after the gzip member")
	}
	return plain
}

// For random sequences of changes, every payload assembled from cached
// pieces — full, delta, app and VIP; JSON and XML; the full and the compact
// form; plain and gzip — is byte
// for byte what the whole-document encoders write for the same snapshot
// (compressed ones after decompression: pieces are compressed apart, so the
// compressed bytes differ from one deflate of the whole). Chunks aim at
// 1.5 KB here rather than 512 KiB, so that 70 apps make several chunks
// whose span changes as the registry grows and shrinks, and apps come and
// go, shifting them.
func TestPayloads_incrementalMatchFromScratch(t *testing.T) {
	gzipBin, _ := exec.LookPath("gzip")
	if gzipBin == "" {
		t.Log("gzip not installed: checking compressed payloads with Go's reader only")
	}
	spans := map[[4]int]bool{}
	defer func() {
		t.Logf("chunk spans seen (JSON, XML, gzip JSON, gzip XML): %v", spans)
		if len(spans) < 3 {
			t.Errorf("chunk spans seen %v: want the span to change as the documents grow", spans)
		}
	}()
	for seed := range uint64(5) {
		n := newTestNode(t, func(c *registry.Config, _ *Config) { c.SelfPreservation = false })
		n.api.pieces.chunkBytes = 1500
		rng := rand.New(rand.NewPCG(seed, 11))
		for step := range 200 {
			registrytest.RandomChange(n.reg, n.clock, rng, 70)
			if step%10 != 9 {
				continue
			}
			for _, form := range docForms {
				checkDocuments(t, n, form, seed == 0 && step == 199 && gzipBin != "")
			}
			spans[n.chunkSpans(false)] = true
		}
	}
}

// encoders are the whole-document encoders of a form.
type encoders struct {
	apps func([]byte, []registry.AppView, string, string) []byte
	app  func([]byte, registry.AppView) []byte
}

func encodersOf(form docForm) encoders {
	switch form {
	case docForm{xml: true}:
		return encoders{wire.AppendApplicationsXML, wire.AppendApplicationXML}
	case docForm{compact: true}:
		return encoders{wire.AppendApplicationsCompactJSON, wire.AppendApplicationCompactJSON}
	case docForm{xml: true, compact: true}:
		return encoders{wire.AppendApplicationsCompactXML, wire.AppendApplicationCompactXML}
	}
	return encoders{wire.AppendApplicationsJSON, wire.AppendApplicationJSON}
}

func checkDocuments(t *testing.T, n *testNode, form docForm, withGzipTool bool) {
	t.Helper()
	snap := n.reg.Snapshot()
	enc := encodersOf(form)
	docs := map[string][]byte{
		"/eureka/apps":       enc.apps(nil, snap.Apps, "1", snap.Hashcode),
		"/eureka/apps/delta": enc.apps(nil, snap.Delta, strconv.FormatUint(snap.DeltaVersion, 10), snap.Hashcode),
	}
	for path, want := range docs {
		if got := fetchRaw(t, n, path, form, false); !bytes.Equal(got, want) {
			t.Fatalf("%s (%v) at version %d:\n got %s\nwant %s", path, form, snap.Version, got, want)
		}
		gz := fetchRaw(t, n, path, form, true)
		if got := gunzipOrFail(t, gz); !bytes.Equal(got, want) {
			t.Fatalf("%s (%v, gzip) at version %d:\n got %s\nwant %s", path, form, snap.Version, got, want)
		}
		if withGzipTool {
			f := filepath.Join(t.TempDir(), "payload.gz")
			if err := os.WriteFile(f, gz, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("gzip", "-dc", f).Output()
			if err != nil || !bytes.Equal(out, want) {
				t.Fatalf("gzip -d of %s (%v): %v, %d bytes, want %d", path, form, err, len(out), len(want))
			}
		}
	}
	if form.compact {
		checkCompactReads(t, form, docs["/eureka/apps"], snap)
	}
	for _, app := range snap.Apps {
		want := enc.app(nil, app)
		if got := fetchRaw(t, n, "/eureka/apps/"+app.Name, form, false); !bytes.Equal(got, want) {
			t.Fatalf("app %s (%v):\n got %s\nwant %s", app.Name, form, got, want)
		}
	}
	for _, vip := range []string{"vip-0", "vip-1", "shared"} {
		for _, secure := range []bool{false, true} {
			apps := snap.VIP(vip, secure)
			if len(apps) == 0 {
				continue
			}
			want := enc.apps(nil, apps, "1", registry.HashcodeOf(apps))
			path := "/eureka/vips/" + vip
			if secure {
				path = "/eureka/svips/" + vip
			}
			if got := fetchRaw(t, n, path, form, false); !bytes.Equal(got, want) {
				t.Fatalf("%s (%v):\n got %s\nwant %s", path, form, got, want)
			}
		}
	}
	if v := n.reg.Snapshot().Version; v != snap.Version {
		t.Fatalf("the registry changed during the check (%d → %d)", snap.Version, v)
	}
}

// checkCompactReads decodes a compact full registry with the project's
// decoders: the same hashcode, and every instance with the fields the
// compact form keeps (and none of those it leaves out).
func checkCompactReads(t *testing.T, form docForm, doc []byte, snap *registry.Snapshot) {
	t.Helper()
	decode := wire.DecodeApplicationsJSON
	if form.xml {
		decode = wire.DecodeApplicationsXML
	}
	got, err := decode(doc)
	if err != nil {
		t.Fatalf("decode compact (%v): %v", form, err)
	}
	if got.Hashcode != snap.Hashcode || len(got.Apps) != len(snap.Apps) {
		t.Fatalf("compact (%v): hashcode %q, %d apps; want %q, %d", form, got.Hashcode, len(got.Apps), snap.Hashcode, len(snap.Apps))
	}
	for i, app := range snap.Apps {
		if len(got.Apps[i].Instances) != len(app.Instances) {
			t.Fatalf("compact (%v) app %s: %d instances, want %d", form, app.Name, len(got.Apps[i].Instances), len(app.Instances))
		}
		for j, iv := range app.Instances {
			in, out := iv.Instance, got.Apps[i].Instances[j].Instance
			if out.InstanceID != in.InstanceID || out.HostName != in.HostName || out.App != in.App || out.IPAddr != in.IPAddr ||
				out.Status != in.Status || out.Port != in.Port || out.SecurePort != in.SecurePort ||
				out.VIPAddress != in.VIPAddress || out.SecureVIPAddress != in.SecureVIPAddress ||
				out.LastUpdatedTimestamp != in.LastUpdatedTimestamp || out.ActionType != in.ActionType ||
				out.DataCenterInfo.Name != in.DataCenterInfo.Name {
				t.Fatalf("compact (%v) instance %s read back as %+v, want %+v", form, in.InstanceID, out, in)
			}
			if len(out.Metadata) != 0 || out.HomePageURL != "" || out.LastDirtyTimestamp != 0 {
				t.Fatalf("compact (%v) instance %s carries fields the compact form leaves out: %+v", form, in.InstanceID, out)
			}
		}
	}
}

// X-Eureka-Accept is read as the Java server reads it (EurekaAccept.
// fromString): "compact" in any case asks for the compact form, any other
// value or none for the full one; the answer varies on it.
func TestGetApps_eurekaAcceptHeader(t *testing.T) {
	n := newTestNode(t)
	in := registrytest.NewInstance("ORDERS", "o1", registrytest.WithMetadata(map[string]string{"zone": "a"}))
	if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		accept  string
		compact bool
	}{{"", false}, {"full", false}, {"mini", false}, {"compact", true}, {"COMPACT", true}, {"Compact", true}} {
		for _, path := range []string{"/eureka/apps", "/eureka/apps/delta", "/eureka/apps/ORDERS", "/eureka/vips/" + in.VIPAddress} {
			headers := []string{"Accept", "application/json"}
			if c.accept != "" {
				headers = append(headers, "X-Eureka-Accept", c.accept)
			}
			r := n.do(t, http.MethodGet, path, "", headers...)
			if r.code != http.StatusOK {
				t.Fatalf("GET %s (X-Eureka-Accept %q): %d %s", path, c.accept, r.code, r.body)
			}
			// Only the full form carries metadata and leaseInfo.
			full := strings.Contains(r.body, `"leaseInfo"`) && strings.Contains(r.body, `"zone":"a"`)
			if full == c.compact || !strings.Contains(r.body, `"instanceId":"o1"`) {
				t.Errorf("GET %s (X-Eureka-Accept %q): compact %v, want %v: %s", path, c.accept, !full, c.compact, r.body)
			}
			if !strings.Contains(strings.Join(r.header.Values("Vary"), ","), "X-Eureka-Accept") {
				t.Errorf("GET %s: Vary %q does not name X-Eureka-Accept", path, r.header.Values("Vary"))
			}
		}
	}
	// A single instance has one form only, as on the Java server.
	r := n.do(t, http.MethodGet, "/eureka/apps/ORDERS/o1", "", "Accept", "application/json", "X-Eureka-Accept", "compact")
	if !strings.Contains(r.body, `"leaseInfo"`) {
		t.Errorf("GET instance with X-Eureka-Accept compact: %s", r.body)
	}
}

// Every form is cached apart, and a change encodes the changed app once per
// form and variant: the full and the compact form, JSON and XML, plain and
// gzip are 8 encodings of one app (an app of more than a few instances is
// compressed on its own), and nothing more for other apps or repeated
// reads.
func TestGetApps_compactOneEncodingPerChangedPiece(t *testing.T) {
	n := newTestNode(t)
	for a := range 5 {
		for i := range 8 {
			in := registrytest.NewInstance(fmt.Sprintf("APP-%d", a), fmt.Sprintf("a%d-i%d", a, i))
			if _, err := n.reg.Apply(registry.RegisterOp(in)); err != nil {
				t.Fatal(err)
			}
		}
	}
	encodings := func() int {
		for _, line := range strings.Split(n.do(t, http.MethodGet, "/metrics", "").body, "\n") {
			if v, ok := strings.CutPrefix(line, "muster_payload_encodings_total "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return int(f)
			}
		}
		t.Fatal("muster_payload_encodings_total missing from /metrics")
		return 0
	}
	fetchAll := func() {
		for _, form := range docForms {
			for _, gz := range []bool{false, true} {
				fetchRaw(t, n, "/eureka/apps", form, gz)
			}
		}
	}
	fetchAll()
	before := encodings()
	fetchAll()
	if got := encodings(); got != before {
		t.Fatalf("reads of an unchanged registry encoded %d pieces", got-before)
	}
	if _, err := n.reg.Apply(registry.StatusOp("APP-2", "a2-i3", registry.StatusOutOfService)); err != nil {
		t.Fatal(err)
	}
	fetchAll()
	fetchAll()
	if got := encodings() - before; got != 8 {
		t.Fatalf("a change in one app encoded %d pieces across the 8 variants, want 8", got)
	}
	if b := gunzipOrFail(t, fetchRaw(t, n, "/eureka/apps", docForm{compact: true}, true)); !strings.Contains(string(b), `"status":"OUT_OF_SERVICE"`) {
		t.Fatalf("compact document after the change: %s", b)
	}
}
