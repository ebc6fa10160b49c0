// Package configserver tests Muster's configserver: imports against a real
// Spring Cloud Config Server: the app in interop/spring/config-server
// (spring-cloud-config-server from Maven Central, native backend, Spring
// Security's basic auth), built by interoptest into a cache outside the
// repository. The tests write the server's folder of files, start its jar,
// and run `muster config --check` and `muster serve` against it; they skip
// with one line where Java, Maven or the Maven registry is missing.
//
// The protocol's edge cases (retry timing, several URIs, odd answers) are
// unit-tested against an httptest server in internal/springconf.
package configserver
