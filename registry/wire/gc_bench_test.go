package wire_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// BenchmarkRegistry_GC marks a registry of Spring-like instances decoded
// as the API decodes them: what one collection costs per instance, the
// price every GC cycle pays at a million. `-bench GC/1000k` takes ~40 s.
func BenchmarkRegistry_GC(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			r, err := registry.New(registry.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				in, err := wire.DecodeInstanceJSON(springFleetBody(i))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Apply(registry.RegisterOp(in)); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			b.ResetTimer()
			for b.Loop() {
				runtime.GC()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/instance")
			runtime.KeepAlive(r)
		})
	}
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
