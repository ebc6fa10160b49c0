// Package client is a Go client for Muster and for any Eureka server (it
// speaks Eureka's REST API, EUREKA.md §1): it registers a service's
// instances and keeps them alive, fetches the registry, and watches
// applications for changes, failing over between the servers of a
// cluster.
//
//	c, err := client.New(client.Config{ /* from DefaultConfig */ })
//	reg, err := c.Register(ctx, client.Instance{App: "orders", HostName: h, IPAddr: ip, Port: 8080})
//	defer reg.Close()                          // cancels at the server
//	updates, err := c.Watch(ctx, "billing")   // the instances of BILLING, now and on every change
//
// # Registering (Register, Registration)
//
// Register sends POST apps/{APP} with the instance as JSON (the body
// registry/wire writes, which Eureka's own codecs read), retrying with
// backoff until a server accepts it. The Registration then sends a
// heartbeat, PUT apps/{APP}/{id}?lastDirtyTimestamp=…, every
// RenewalInterval (30 s by default; the server keeps the instance for
// LeaseDuration, 90 s, without one). A heartbeat answered 404 means the
// server lost the instance (a restart, an eviction, a failover to a server
// that never had it) or holds older data: the Registration raises its
// lastDirtyTimestamp and registers again, as the Java client does
// (DiscoveryClient#renew). A failed heartbeat is retried with backoff,
// never later than the next interval. SetStatus changes the instance's
// own status by registering again; Client.SetStatusOverride and
// DeleteStatusOverride set and remove the operator's override (PUT and
// DELETE apps/{APP}/{id}/status). Registration.Close, and Client.Close for
// every registration still open, stops the heartbeats and cancels the
// instance (DELETE apps/{APP}/{id}).
//
// # Fetching (Fetch)
//
// Fetch keeps a copy of the whole registry: a full fetch (GET apps/) the
// first time, then deltas (GET apps/delta) applied to the copy. Every
// delta carries apps__hashcode, the server's count of instances per status
// ("DOWN_1_UP_3_"); when the copy's count differs after the delta, Fetch
// replaces the copy with a full fetch, so a missed change never lingers.
//
// # Watching (Watch)
//
// Watch delivers the instances of one app, now and after every change. It
// uses Muster's blocking fetches when the server offers them and polls
// otherwise, deciding on every answer. The blocking protocol, which a
// server implements and this package relies on, is:
//
//  1. The client asks GET {base}apps/{APP} (Accept: application/json,
//     gzip accepted). A server that supports blocking fetches answers
//     every such request, 404 included, with the header X-Muster-Index:
//     a decimal version (uint64) of what the answer describes, the app's
//     last change on that server. The body is exactly what a plain
//     request gets.
//  2. The client then asks GET {base}apps/{APP}?index=N&wait=D with N the
//     X-Muster-Index it last saw from that server and D a Go duration
//     (time.ParseDuration, e.g. "30s"; WatchWait). If N differs from the
//     app's current version (it changed since, or N is from before a
//     restart of the server), the server answers at once. Otherwise it
//     holds the request until the app changes, then answers, or until D
//     passes (clamped to the server's maximum, plus a little jitter), then
//     answers unchanged, with the same index.
//  3. A malformed index or wait is answered 400. This client never sends
//     one; it takes a 400 to a held request as "this server does not
//     support blocking fetches" and polls it instead.
//
// The index numbers one server's changes, so it is sent only to the server
// that gave it; after a failover the first request to the new server is a
// plain one. A server that answers held requests at once with an
// unchanged index (for example one over its limit of watchers) is asked
// again after a backoff from RetryBackoff up to PollInterval, not in a
// tight loop. Against a server without X-Muster-Index (a plain Eureka
// server, whose caches make changes visible up to 30 s late anyway), the
// watch polls every PollInterval and delivers only lists that differ from
// the last one.
//
// # Servers and failover
//
// Config.Servers lists the servers with their zones; those in the client's
// own zone are asked first (the Java client's prefer-same-zone-eureka). A
// request goes to the current server; a network error or a status that
// says the server cannot serve it (5xx, 403 on a read) moves the client to
// the next server, and the request is retried there, up to three servers
// (two for a heartbeat), as the Java client's RetryableEurekaHttpClient
// does. The client stays on a server that works; ZoneRetryInterval after
// a failover it moves back to its first server. User information in a
// server URL (http://user:pass@host:8761/eureka/) becomes HTTP basic auth
// for that server; errors and logs show the URL without it.
//
// # Time, goroutines, cancellation
//
// New starts nothing. Each Registration runs one goroutine, which its
// Close (or the Client's) ends; each Watch runs one goroutine, which its
// context ends, closing the channel. Every request is bounded by its
// context and RequestTimeout. Heartbeats, polls, backoff and the zone
// return wait on Config.Clock, which tests replace with a manual clock.
package client
