package wire_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/proccontrol"
	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// BenchmarkRegistry_GC marks a registry of Spring-like instances decoded
// as the API decodes them: what one collection costs per instance, the
// price every GC cycle pays at a million. "fresh" is right after the fleet
// registered; "settled" two renewal windows later, once the eviction runs
// have forgotten the arrivals (what a node holds after that is leases,
// instances and indexes). `-bench GC/1000k` takes ~60 s.
func BenchmarkRegistry_GC(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		now := time.Unix(1_700_000_000, 0)
		cfg := registry.DefaultConfig()
		cfg.Now = func() time.Time { return now }
		r, err := registry.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]registry.InstanceKey, n)
		for i := range n {
			in, err := wire.DecodeInstanceJSON(springFleetBody(i))
			if err != nil {
				b.Fatal(err)
			}
			stored, err := r.Apply(registry.RegisterOp(in))
			if err != nil {
				b.Fatal(err)
			}
			// The stored copy's strings: the decoded ones would keep
			// what the registry let go.
			keys[i] = registry.InstanceKey{App: stored.App, ID: stored.ID()}
		}
		collect := func(b *testing.B) {
			objects, bytes := heapPer(n)
			collectEach(b, n, "ns/instance")
			b.ReportMetric(objects, "objects/instance")
			b.ReportMetric(bytes, "heap-B/instance")
		}
		b.Run(fmt.Sprintf("%dk/fresh", n/1000), collect)
		for range 2 {
			now = now.Add(cfg.RenewalRateWindow + time.Second)
			for _, k := range keys {
				if _, err := r.Apply(registry.RenewOp(k.App, k.ID)); err != nil {
					b.Fatal(err)
				}
			}
			r.EvictExpired()
		}
		b.Run(fmt.Sprintf("%dk/settled", n/1000), collect)
		runtime.KeepAlive(r)
	}
}

// BenchmarkGC_control is the floor BenchmarkRegistry_GC is measured
// against on this machine: one collection of a live heap the size of a
// million-instance registry's (~1.6 GB) that holds no pointers, and of a
// million tiny objects, one pointer each, allocated in order (as dense as
// objects get).
func BenchmarkGC_control(b *testing.B) {
	const n = 1_000_000
	b.Run("pointer-free-1600MB", func(b *testing.B) {
		chunks := make([][]byte, 1600)
		for i := range chunks {
			chunks[i] = make([]byte, 1<<20)
		}
		collectEach(b, n, "ns/instance-equivalent")
		runtime.KeepAlive(chunks)
	})
	b.Run("1M-bare-objects", func(b *testing.B) {
		objs := make([]*[16]byte, n)
		for i := range objs {
			objs[i] = new([16]byte)
		}
		collectEach(b, n, "ns/object")
		runtime.KeepAlive(objs)
	})
}

// collectEach times full collections of what is live, per one of n: the
// wall time, and the process's CPU time ("cpu-" unit), which is what
// tools/bench's idle GC row counts (the mark workers of both cores, while
// the wall time is that of the slower one).
func collectEach(b *testing.B, n int, unit string) {
	runtime.GC()
	b.ResetTimer()
	cpu0 := proccontrol.CPU()
	for b.Loop() {
		runtime.GC()
	}
	cpu := proccontrol.CPU() - cpu0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), unit)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-"+unit)
}

// heapPer is the live heap objects and bytes per one of n (the
// registry's beside a test binary's few thousand objects; the bytes
// include the fleet's keys, 32 B an instance, which the benchmark keeps
// to renew them).
func heapPer(n int) (objects, bytes float64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapObjects) / float64(n), float64(ms.HeapAlloc) / float64(n)
}

func springFleetBody(i int) []byte {
	app := i / 50
	host := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", i>>16&255, i>>8&255, i&255)
	md := fmt.Sprintf(`"management.port":"8081","version":"1.%d.%d","zone":"eu-west-1%c"`, app%20, i%7, 'a'+i%3)
	if i%3 >= 1 {
		md += fmt.Sprintf(`,"git.commit":"%07x"`, (app*7919+i%7)&0xfffffff)
	}
	if i%3 == 2 {
		md += `,"profile":"prod"`
	}
	vip := fmt.Sprintf("service-%d", app)
	return fmt.Appendf(nil, `{"instance":{"instanceId":"%s:%s:8080","hostName":"%s","app":"SERVICE-%d","ipAddr":"10.%d.%d.%d","status":"UP","overriddenStatus":"UNKNOWN",`+
		`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},`+
		`"metadata":{%s},`+
		`"homePageUrl":"http://%s:8080/","statusPageUrl":"http://%s:8081/actuator/info","healthCheckUrl":"http://%s:8081/actuator/health",`+
		`"vipAddress":"%s","secureVipAddress":"%s","isCoordinatingDiscoveryServer":"false",`+
		`"lastUpdatedTimestamp":"1700000000000","lastDirtyTimestamp":"1700000000000"}}`,
		host, vip, host, app, i>>16&255, i>>8&255, i&255, md, host, host, host, vip, vip)
}
