package main

import (
	"fmt"
	"strconv"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/wire"
)

// The bench fleet: instance i belongs to app SERVICE-<i/50> (50 instances
// per app, so 200 apps at 10k and 2000 at 100k) and looks like what a
// Spring Cloud client on EC2 registers: Spring's host:app:port instance
// id, actuator URLs, a 30 s heartbeat and a 90 s lease, and 3 to 5
// metadata entries. Addresses are scattered over 10.0.0.0/8 (a bijection
// of i, so no two instances share one): sequential ones would compress far
// better than a real registry does.
const benchPerApp = 50

// benchEpochMs is the lastDirtyTimestamp base of the fleet (ms).
const benchEpochMs = 1718000000000

func benchAppName(i int) string { return fmt.Sprintf("SERVICE-%04d", i/benchPerApp) }

func benchVIP(i int) string { return fmt.Sprintf("service-%04d", i/benchPerApp) }

// benchAddr is instance i's address within 10.0.0.0/8: i times an odd
// constant modulo 2^24 is a bijection.
func benchAddr(i int) (a, b, c int) {
	p := (i*0x9e3779 + 0x5a5a5a) & 0xffffff
	return p >> 16, p >> 8 & 255, p & 255
}

func benchIP(i int) string {
	a, b, c := benchAddr(i)
	return fmt.Sprintf("10.%d.%d.%d", a, b, c)
}

func benchHost(i int) string {
	a, b, c := benchAddr(i)
	return fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", a, b, c)
}

func benchInstanceID(i int) string { return benchHost(i) + ":" + benchVIP(i) + ":8080" }

func benchDirty(i int) int64 { return benchEpochMs + int64(benchMix(uint64(i))%(7*24*3600*1000)) }

// benchRegisterBody is instance i as Spring Cloud's Eureka client posts it.
func benchRegisterBody(i int) []byte {
	host, ip, vip := benchHost(i), benchIP(i), benchVIP(i)
	app := uint64(i / benchPerApp)
	md := `"management.port":"8081","version":"1.` + strconv.Itoa(int(benchMix(app)%20)) + `.` + strconv.Itoa(i%7) +
		`","zone":"eu-west-1` + string(rune('a'+i%3)) + `"`
	if i%3 >= 1 {
		md += `,"git.commit":"` + fmt.Sprintf("%07x", benchMix(app+uint64(i%7))&0xfffffff) + `"`
	}
	if i%3 == 2 {
		md += `,"profile":"prod"`
	}
	return fmt.Appendf(nil, `{"instance":{"instanceId":"%s","hostName":"%s","app":"%s","ipAddr":"%s","status":"UP","overriddenStatus":"UNKNOWN",`+
		`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":0,"lastRenewalTimestamp":0,"evictionTimestamp":0,"serviceUpTimestamp":0},`+
		`"metadata":{%s},`+
		`"homePageUrl":"http://%s:8080/","statusPageUrl":"http://%s:8081/actuator/info","healthCheckUrl":"http://%s:8081/actuator/health",`+
		`"vipAddress":"%s","secureVipAddress":"%s","isCoordinatingDiscoveryServer":"false",`+
		`"lastUpdatedTimestamp":"%d","lastDirtyTimestamp":"%d"}}`,
		benchInstanceID(i), host, benchAppName(i), ip, md, host, host, host, vip, vip, benchDirty(i), benchDirty(i))
}

// benchInstance is instance i decoded the way the API decodes a register.
func benchInstance(i int) *registry.Instance {
	in, err := wire.DecodeInstanceJSON(benchRegisterBody(i))
	if err != nil {
		panic(fmt.Sprintf("bench fleet instance %d does not decode: %v", i, err))
	}
	return in
}

// benchHeartbeatPath is Spring's renewal of instance i.
func benchHeartbeatPath(i int) string {
	return "/eureka/apps/" + benchAppName(i) + "/" + benchInstanceID(i) + "?status=UP&lastDirtyTimestamp=" + strconv.FormatInt(benchDirty(i), 10)
}

// benchStatusPath sets a status override on instance i.
func benchStatusPath(i int, status string) string {
	return "/eureka/apps/" + benchAppName(i) + "/" + benchInstanceID(i) + "/status?value=" + status
}

// Headers as the Java Eureka client (Jersey + Apache HttpClient) sends them.
const (
	benchClientHeaders = "Accept: application/json\r\nAccept-Encoding: gzip\r\nDiscoveryIdentity-Name: DefaultClient\r\n" +
		"DiscoveryIdentity-Version: 1.4\r\nDiscoveryIdentity-Id: 10.0.0.1\r\nUser-Agent: Java-EurekaClient/v1.10.17\r\n"
	benchJSONBodyHeaders = benchClientHeaders + "Content-Type: application/json\r\n"
)
