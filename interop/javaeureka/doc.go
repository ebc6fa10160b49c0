// Package javaeureka holds the interop tests against the real Netflix
// Eureka Java client (eureka-client 1.10.18's DiscoveryClient, the client
// Spring Cloud Netflix wraps) and server (eureka-core 1.10.18), run from
// ../shared/java-eureka beside the repository. They build the muster
// binary and start nodes and Java clients as processes:
//
//   - the fixed-script driver (client/run.sh): every codec, gzip, deltas,
//     overrides, metadata, the compact form (X-Eureka-Accept: compact),
//     and the re-registration after an empty heartbeat 404;
//   - the driver finding the node by Eureka's DNS server discovery (TXT
//     records from the node's DNS interface; it needs root for port 53
//     and a private mount namespace, and skips otherwise);
//   - a long-running DiscoveryClient steered over stdin (testdata/agent,
//     compiled with javac at test time): eviction, a node restart without
//     data dir, failover between serviceUrls and back, basic auth in the
//     URL, TLS, shutdown cancel.
//
// The server-side tests (a Eureka server as Muster's peer, and the
// migration of docs/migration-from-java-eureka.md) moved to
// interop/springserver, against the Spring Cloud Eureka Server.
//
// Without the folder, a Java runtime, its libraries or javac the tests
// skip and say why, so `go test ./...` passes anywhere; scripts/test.sh
// installs them (../shared/java-eureka/install.sh --jdk) when it runs as
// root. Independent scenarios run as parallel tests: about 2.5 minutes on
// two cores, most of it the driver's two fixed runs.
package javaeureka
