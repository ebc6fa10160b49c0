// Package httpapi is the HTTP face of a Muster node: Eureka's REST API under
// /eureka/ and /eureka/v2/ (register, heartbeat, cancel, status overrides,
// metadata, full and delta fetches, app, instance and VIP lookups), the
// peer replication batch endpoint, the dashboard at /, /admin/status,
// /readyz, /livez and /metrics.
//
// Reads come from the registry's versioned snapshots; each payload (kind,
// name, JSON or XML, gzip or not) is assembled at most once per registry
// version and shared by every reader, so reads see writes at once. A
// payload is assembled from per-app pieces (pieces.go) encoded once per
// app version, so a change re-encodes its own app only: the full registry,
// the delta, app and VIP lookups are joined from cached pieces, and gzip
// payloads from separately compressed pieces joined into one gzip member
// (internal/gzjoin). The format follows Eureka: JSON when Accept mentions
// json, XML otherwise; X-Eureka-Accept: compact asks for the compact form
// of full, delta, app and VIP documents, whose pieces are kept apart.
//
// The dashboard (console*.go, assets/) is an operator's console built on
// the same snapshots: an index per version for the apps overview and the
// searches, an hour of self-preservation samples taken by Server.Run, and
// actions that call the same write paths as the Eureka handlers, guarded by
// roles (admin) or, without authentication, by
// Config.ConsoleActions, and by a CSRF token.
//
// Watches (watch*.go): every registry read carries X-Muster-Index, the
// version of what it describes, and with index and wait it becomes a
// blocking fetch, held until that view changes (the protocol the client
// package speaks, client/doc.go). One goroutine, the watch hub, reads the
// registry's change stream through a Cursor and keeps each app's version;
// a held request parks on a channel the hub closes at its app's next
// change (or any change, for registry-wide views), so idle watchers cost
// memory and no CPU. GET /eureka/watch streams every change as a
// server-sent event from its own Cursor, resumable by index, with a resync
// event where changes were lost. StopWatches, run when the HTTPServer shuts
// down, answers every held request and ends every stream.
//
// auth.go guards every route but /livez and /readyz once users
// (Config.Auth) or a peer secret (Config.PeerVerifier) are configured: HTTP
// Basic users with read, write (optionally per app) and admin roles, and
// HMAC-signed peer requests for the batch endpoint and syncUp reads. It also
// decides whether the x-netflix-discovery-replication header counts; an
// untrusted one is dropped, so the request is an ordinary client request.
// The registry never sees a credential.
//
// errors.go is the one place that turns errors into status codes: bad input
// of any kind is a 4xx with a one-line plain-text reason and changes
// nothing; handler panics become a 500 and a log line, never a crash.
//
// limits.go bounds what connections can hold: a body read deadline, write
// deadlines that move with each 128 KiB the reader takes, no buffer reserved from a
// declared Content-Length, a connection limit (LimitListener) and the
// HTTPServer settings; muster_limit_rejections_total counts every limit met.
package httpapi
