// Package spring holds the interop tests of the Java Eureka clients Spring
// teams run today, each built by Maven from Maven Central into the interop
// cache (interop/interoptest) and run as a process against Muster nodes
// started from the muster binary:
//
//   - boot4-client: Spring Boot 4.0 + Spring Cloud 2025.1
//     (spring-cloud-netflix 5.0, eureka-client 2.0), run once with Spring's
//     RestClient (its default) and once with WebClient
//     (eureka.client.webclient.enabled=true);
//   - boot3-client: Spring Boot 3.5 + Spring Cloud 2025.0
//     (spring-cloud-netflix 4.3), run with RestTemplate (its default) and
//     with RestClient (eureka.client.restclient.enabled=true);
//   - eureka2-driver: Netflix's eureka-client 2.0 alone, with its Jersey 3
//     transport (eureka-client-jersey3);
//   - eureka1-driver: Netflix's eureka-client 1.10 with Jersey 1.
//
// Every client runs the same scenarios (scenarios_test.go): register,
// heartbeats, a full fetch then deltas with no hashcode mismatch, its own
// status, a status override and its removal (Spring's
// /actuator/serviceregistry, and an operator's through the REST API),
// metadata, the re-registration after a heartbeat 404 (an eviction, a node
// restarted without a data dir, an operator's cancel), cancel at shutdown,
// failover between two nodes, basic auth from user:pass@ in the service URL
// and TLS; the plain eureka-client drivers also read the registry with
// every codec they can be set to and run with eureka.clientDataAccept=
// compact. The clients talk to the nodes through WireTaps: every failure
// lists the exchanges the client had (method, path, status, content type,
// encoding), and `go test -v` logs each scenario's kinds of exchange with
// their counts. pair_test.go runs a Boot 4 and a Boot 3 app side by side
// against two peered nodes. dns_test.go has eureka-client 2.0 and a Boot 4
// app find the node by Eureka's DNS server discovery (TXT records from the
// node's DNS interface; root only, for port 53 and a private mount
// namespace with its own /etc/resolv.conf, docs/dns.md).
// contextpath_test.go runs a Boot 4 app and eureka-client 2.0 against a
// node under server.servlet.context-path=/register.
// springpeer_test.go puts Spring apps on both sides of a Spring Cloud
// Eureka Server 5.0 (interop/spring/eureka-server) peered with a Muster
// node: a Boot 4 app on the Spring server and a Boot 3 app on Muster find
// and call each other, and each sees the other gone when it stops.
// drain_test.go is issue 45's rolling restart: a Boot 4 caller calls a
// two-instance Boot 4 service (a @LoadBalanced RestTemplate, /control/lbcall)
// at 20 calls a second while the service restarts one instance at a time,
// once without a preStop (the control: failed calls) and once with
// `muster drain --wait` before each stop (none). The package takes about
// six minutes on two cores (at most three JVMs at once; the rolling
// restart about three of them).
//
// The apps are steered over their own HTTP port: /control/state (the
// registry as the client fetched it, Spring's DiscoveryClient view, the
// client's re-registration and hashcode-mismatch counters),
// /control/status and /control/metadata, and, in the Spring apps,
// /actuator/serviceregistry. Where Java, Maven or Maven Central is missing
// the tests skip with one line saying why.
package spring
