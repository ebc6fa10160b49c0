// Package springserver holds the interop tests against the Spring Cloud
// Netflix Eureka Server 5.0 (Spring Boot 4.0, Spring Cloud 2025.1,
// eureka-core 2.0 with its Jersey 3 transport): the server Spring teams run
// today and replace with Muster. The app is interop/spring/eureka-server
// (a pom.xml with pinned versions and one @EnableEurekaServer class),
// built by Maven into the interop cache outside the repository
// (interoptest.Build).
//
// The tests run Muster nodes, Spring servers and Go clients (the client
// package: real registrations, heartbeats, re-registration after a 404,
// full and delta fetches) as processes and goroutines on loopback:
//
//   - a Spring server and a Muster node as each other's static peers:
//     syncUp both ways, replication of every change in both directions,
//     Eureka's 404 → register and 409 → newer copy repairs both ways, a
//     healed partition, and a client on each side seeing the other's
//     instance;
//   - the migration of docs/migration-from-java-eureka.md end to end,
//     from a pair of Spring servers to two gossiping Muster nodes.
//   - a Spring server and a Muster node as each other's remote region
//     (issue 37), a Spring Boot client on each side seeing the other
//     region's instance, and each server's fetches of the other checked
//     on the wire (docs/regions.md).
//
// Spring apps (a Boot 4 app on the Spring server, a Boot 3 app on Muster)
// on both sides of the same peering are in interop/spring
// (springpeer_test.go), beside the apps' own harness.
//
// Without java, mvn or Maven Central the tests skip with one line saying
// why, so `go test ./...` passes anywhere.
package springserver
