package httpapi_test

import (
	"bytes"
	"compress/gzip"

	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/muster-registry/muster/httpapi"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
	"github.com/muster-registry/muster/registry/wire"
)

// rawClient leaves gzip to the test and reuses its connections.
var rawClient = &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}

// fetchRaw GETs path and returns the body as sent (still compressed when
// gz) and whether it came gzip-encoded.
func fetchRaw(t *testing.T, n *testNode, path string, xml, gz bool) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, n.http.URL+path, nil)
	req.Header.Set("Accept", "application/json")
	if xml {
		req.Header.Set("Accept", "application/xml")
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
// pieces — full, delta, app and VIP; JSON and XML; plain and gzip — is byte
// for byte what the whole-document encoders write for the same snapshot
// (compressed ones after decompression: pieces are compressed apart, so the
// compressed bytes differ from one deflate of the whole). Chunks aim at
// 1.5 KB here rather than 512 KiB, so that 70 apps make several chunks
// whose span changes as the registry grows and shrinks, and apps come and
// go, shifting them.
func TestPayloads_incrementalMatchFromScratch(t *testing.T) {
	defer httpapi.SetChunkBytes(1500)()
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
		n := newTestNode(t, func(c *registry.Config, _ *httpapi.Config) { c.SelfPreservation = false })
		rng := rand.New(rand.NewPCG(seed, 11))
		for step := range 200 {
			registrytest.RandomChange(n.reg, n.clock, rng, 70)
			if step%10 != 9 {
				continue
			}
			for _, xml := range []bool{false, true} {
				checkDocuments(t, n, xml, seed == 0 && step == 199 && gzipBin != "")
			}
			spans[n.srv.ChunkSpans(false)] = true
		}
	}
}

func checkDocuments(t *testing.T, n *testNode, xml, withGzipTool bool) {
	t.Helper()
	snap := n.reg.Snapshot()
	encode := wire.AppendApplicationsJSON
	if xml {
		encode = wire.AppendApplicationsXML
	}
	docs := map[string][]byte{
		"/eureka/apps":       encode(nil, snap.Apps, "1", snap.Hashcode),
		"/eureka/apps/delta": encode(nil, snap.Delta, strconv.FormatUint(snap.DeltaVersion, 10), snap.Hashcode),
	}
	for path, want := range docs {
		if got := fetchRaw(t, n, path, xml, false); !bytes.Equal(got, want) {
			t.Fatalf("%s (xml %v) at version %d:\n got %s\nwant %s", path, xml, snap.Version, got, want)
		}
		gz := fetchRaw(t, n, path, xml, true)
		if got := gunzipOrFail(t, gz); !bytes.Equal(got, want) {
			t.Fatalf("%s (xml %v, gzip) at version %d:\n got %s\nwant %s", path, xml, snap.Version, got, want)
		}
		if withGzipTool {
			f := filepath.Join(t.TempDir(), "payload.gz")
			if err := os.WriteFile(f, gz, 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("gzip", "-dc", f).Output()
			if err != nil || !bytes.Equal(out, want) {
				t.Fatalf("gzip -d of %s (xml %v): %v, %d bytes, want %d", path, xml, err, len(out), len(want))
			}
		}
	}
	for _, app := range snap.Apps {
		want := wire.AppendApplicationJSON(nil, app)
		if xml {
			want = wire.AppendApplicationXML(nil, app)
		}
		if got := fetchRaw(t, n, "/eureka/apps/"+app.Name, xml, false); !bytes.Equal(got, want) {
			t.Fatalf("app %s (xml %v):\n got %s\nwant %s", app.Name, xml, got, want)
		}
	}
	for _, vip := range []string{"vip-0", "vip-1", "shared"} {
		for _, secure := range []bool{false, true} {
			apps := snap.VIP(vip, secure)
			if len(apps) == 0 {
				continue
			}
			want := encode(nil, apps, "1", registry.HashcodeOf(apps))
			path := "/eureka/vips/" + vip
			if secure {
				path = "/eureka/svips/" + vip
			}
			if got := fetchRaw(t, n, path, xml, false); !bytes.Equal(got, want) {
				t.Fatalf("%s (xml %v):\n got %s\nwant %s", path, xml, got, want)
			}
		}
	}
	if v := n.reg.Snapshot().Version; v != snap.Version {
		t.Fatalf("the registry changed during the check (%d → %d)", snap.Version, v)
	}
}
