// Package simclient simulates Eureka clients: a Fleet of N instances over M
// apps that registers, renews, fetches and cancels the way the Java client
// (com.netflix.discovery.DiscoveryClient, as Spring Cloud runs it) does. It
// drives tools/clients, which docker-compose runs to populate a cluster,
// chaos scenarios kill and watch, and benchmarks load servers with.
//
// A fleet behaves like one client process: the instances share one
// client.Client from the project's Go client package (one keep-alive HTTP
// client, one server list with one current server, one registry copy), so
// every run of the fleet, chaos runs included, exercises that package's
// requests, failover and fetches. A real process runs one instance; 10 000 of them are
// simulated without 10 000 goroutines (see "Scheduling").
//
// # Instances
//
// Instance i belongs to app APP-<i mod Apps> (APP-00, APP-01, …) and is its
// (i div Apps)-th instance n: instance id and host name
// <IDPrefix>-<app in lower case>-<n> (sim-app-03-7), ipAddr 10.h.x.y
// (h from a hash of the prefix, x.y from i), port 8080, vipAddress and
// secureVipAddress the lower-case app name, Spring's home, status and
// health URLs, leaseInfo {RenewalInterval, LeaseDuration} in whole
// seconds, metadata {zone: Zone}, dataCenterInfo MyOwn with its @class.
// The client package encodes bodies with registry/wire, like the server.
//
// # Lifecycle (Run)
//
//  1. Register every instance, Workers at a time: POST {server}apps/{APP}
//     with a JSON body (client.Client.RegisterOnce); Eureka answers 204.
//     Run logs the pace (Stats.RegistrationRate).
//  2. Renew each instance every RenewalInterval: PUT
//     {server}apps/{APP}/{id}?status=UP&lastDirtyTimestamp=<ms>. A 404 means
//     the server does not know the instance (or holds older data): the
//     instance bumps its lastDirtyTimestamp and registers again
//     (ReRegistrations), as DiscoveryClient#renew does. An instance whose
//     registration failed registers at its renewal time instead.
//  3. Meanwhile, unless FetchDisabled, fetch every FetchInterval (first at
//     once) with client.Client.Fetch: a full GET {server}apps/ when the view is empty, else GET
//     {server}apps/delta; ADDED and MODIFIED add or replace an instance,
//     DELETED removes it; then the copy's reconcile hashcode (instance
//     counts per status) is compared with the
//     delta's apps__hashcode, and a mismatch triggers a full fetch that
//     replaces the view (ReconcileFetches). A delta answered 403 or 404
//     (disabled, or reads refused) falls back to a full fetch at once, as
//     in DiscoveryClient#getAndUpdateDelta. A full fetch that returns no
//     instance after the fleet has seen some counts in EmptyRegistrySeen.
//  4. When ctx ends: stop renewing and fetching, then DELETE
//     {server}apps/{APP}/{id} for every registered instance, Workers at a
//     time, within CancelTimeout, as Spring's client does on shutdown. A
//     SIGKILLed process cancels nothing, and its leases expire.
//
// # Failover
//
// The client package fails over (see its documentation): servers of the
// fleet's Zone first; a network error or a status the Java client's
// legacy evaluator does not accept (a 5xx, a 403 on a read) moves the
// fleet to the next server, once per failure even when many requests in
// flight fail together, and the request is retried there: once for a
// heartbeat, up to 3 servers for the others (RetryableEurekaHttpClient's
// 3 attempts). ZoneRetryInterval after a failover the fleet moves back to
// its first server, as the Java client's sessioned HTTP client reconnects
// every 20 min (randomised) and thereby returns to its zone; if that
// server is still down, the next request fails over again.
//
// # Scheduling
//
// Instance i first renews at start + RenewalInterval·(i+1)/N, so renewals
// are spread evenly over the interval, and then one interval after its
// previous due time (never before the previous renewal ended). The due
// times sit in a min-heap; one scheduler goroutine pops what is due and
// hands it to a pool of Workers goroutines, which renew and push the
// instance back. 10 000 instances at 30 s are 333 requests a second over
// a handful of keep-alive connections.
//
// # Figures
//
// Stats returns atomic counters and gauges (see Stats); tools/clients
// prints them as progress lines, serves them as JSON on --status-addr
// /stats, and prints a final summary.
package simclient
