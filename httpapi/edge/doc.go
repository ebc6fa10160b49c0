// Package edge owns what every request meets before a handler: who may
// call (Guard: HTTP Basic users with read, write and admin roles, and
// HMAC-signed peers; the replication header kept only where it can be
// trusted) and what a connection may hold (Limits: a body read deadline,
// write deadlines that move with each 128 KiB the reader takes — followed
// through TCP_INFO's acknowledged bytes on Linux (progress.go) — a
// connection limit and the body-size cap).
//
// A refused request changes nothing: the guard runs before the handler
// reads a byte, and every refusal is counted (muster_auth_failures_total,
// and the counts the server exports as muster_limit_rejections_total).
// Nothing here knows the Eureka API beyond the route patterns accessFor
// classes, where a route not listed needs admin.
package edge
