package proccontrol

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ready is the line a process under benchmark prints on stdout once it
// serves.
type Ready struct {
	Mode    string `json:"mode"`
	PID     int    `json:"pid"`
	API     string `json:"api"`              // host:port of the Eureka API (or the ceiling's routes)
	Control string `json:"control"`          // host:port of the control listener
	Gossip  string `json:"gossip,omitempty"` // memberlist host:port of a clustered node
}

// Mem is the process's memory after GC.
type Mem struct {
	HeapAlloc  uint64 `json:"heapAlloc"`  // live heap after two GCs
	HeapInuse  uint64 `json:"heapInuse"`  // spans in use
	HeapSys    uint64 `json:"heapSys"`    // heap obtained from the OS
	RSS        uint64 `json:"rss"`        // VmRSS
	Goroutines int    `json:"goroutines"` // for sanity
}

// GC is what the garbage collector has done so far in this process.
type GC struct {
	// Automatic counts the cycles the runtime started itself (not
	// runtime.GC or FreeOSMemory): one means the heap has grown to its
	// goal and been collected as it is in normal running.
	Automatic uint64 `json:"automatic"`
	// CPUSeconds is the CPU the collector has used in all (mark workers,
	// assists and pauses), as the runtime counts it.
	CPUSeconds float64 `json:"cpuSeconds"`
	// AllocBytes is what the process has allocated on the heap so far:
	// between two readings, what drives the collector (a cycle starts each
	// time the heap grows by GOGC % of the live heap).
	AllocBytes uint64 `json:"allocBytes"`
}

// Handle adds the endpoints about this process to mux:
//
//	GET /cpu                user+system CPU seconds of this process
//	GET /mem[?free=1]       heap after two GCs, RSS (optionally after FreeOSMemory)
//	GET /gc                 automatic GC cycles and the collector's CPU so far (GC)
//	GET /profile?seconds=N  CPU profile of this process (kind=heap: heap profile)
func Handle(mux *http.ServeMux) {
	mux.HandleFunc("/cpu", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%.6f", CPU().Seconds())
	})
	mux.HandleFunc("/mem", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(ReadMem(r.URL.Query().Get("free") == "1"))
	})
	mux.HandleFunc("/gc", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(ReadGC())
	})
	mux.HandleFunc("/profile", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("kind") == "heap" {
			runtime.GC()
			_ = pprof.Lookup("heap").WriteTo(w, 0)
			return
		}
		secs, _ := strconv.Atoi(r.URL.Query().Get("seconds"))
		if secs <= 0 {
			secs = 5
		}
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		time.Sleep(time.Duration(secs) * time.Second)
		pprof.StopCPUProfile()
	})
}

// Serve serves mux on a loopback port it picks and returns that host:port
// and the server (Close it when done).
func Serve(mux *http.ServeMux) (string, *http.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), srv, nil
}

// ReadMem runs two GCs (and returns freed memory to the OS when free is
// set) and reads the heap and RSS.
func ReadMem(free bool) Mem {
	runtime.GC()
	runtime.GC()
	if free {
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Mem{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, HeapSys: ms.HeapSys,
		RSS: rss(), Goroutines: runtime.NumGoroutine()}
}

// ReadGC reads the collector's counters without running it.
func ReadGC() GC {
	s := []metrics.Sample{{Name: "/gc/cycles/automatic:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	var g GC
	g.Automatic, g.AllocBytes = u(0), u(2)
	if s[1].Value.Kind() == metrics.KindFloat64 {
		g.CPUSeconds = s[1].Value.Float64()
	}
	return g
}

// rss reads VmRSS of this process from /proc/self/status (bytes; 0 where
// there is no /proc).
func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// CPU is the user+system CPU time of this process.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
