package proccontrol

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
)

func TestHandle_reportsCPUAndMemoryOverLoopback(t *testing.T) {
	mux := http.NewServeMux()
	Handle(mux)
	addr, srv, err := Serve(mux)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		return b
	}
	if cpu, err := strconv.ParseFloat(string(get("/cpu")), 64); err != nil || cpu <= 0 {
		t.Errorf("/cpu = %q (%v), want a positive number of seconds", get("/cpu"), err)
	}
	var m Mem
	if err := json.Unmarshal(get("/mem?free=1"), &m); err != nil {
		t.Fatal(err)
	}
	if m.HeapAlloc == 0 || m.HeapSys < m.HeapInuse || m.Goroutines < 2 {
		t.Errorf("/mem = %+v", m)
	}
	var before GC
	if err := json.Unmarshal(get("/gc"), &before); err != nil {
		t.Fatal(err)
	}
	var sink [][]byte
	for range 1000 {
		sink = append(sink, make([]byte, 64<<10))
		if len(sink) > 16 {
			sink = sink[:0]
		}
	}
	var after GC
	if err := json.Unmarshal(get("/gc"), &after); err != nil {
		t.Fatal(err)
	}
	if after.Automatic <= before.Automatic || after.CPUSeconds <= before.CPUSeconds {
		t.Errorf("/gc before %+v, after allocating 64 MB %+v: want more automatic cycles and GC CPU", before, after)
	}
	if len(get("/profile?kind=heap")) == 0 {
		t.Error("heap profile is empty")
	}
}
