// Package javaeureka holds the interop tests against the real Netflix
// Eureka Java client (eureka-client 1.10.18's DiscoveryClient, the client
// Spring Cloud Netflix wraps), run from ../shared/java-eureka beside the
// repository. They build the muster binary, start nodes as processes and
// let the Java driver register, heartbeat, fetch full and delta payloads
// with every Eureka codec (and in the compact form, X-Eureka-Accept:
// compact), and lose its instance on the server, which it must repair by
// registering again after an empty heartbeat 404. One test lets the client
// find the node by Eureka's DNS server discovery (TXT records from the
// node's DNS interface; it needs root for port 53 and a private mount
// namespace, and skips otherwise).
//
// Without the folder or a Java runtime the tests skip and say why, so
// `go test ./...` passes anywhere; scripts/test.sh installs the runtime
// (../shared/java-eureka/install.sh) when it runs as root.
package javaeureka
