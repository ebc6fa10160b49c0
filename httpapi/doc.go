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
// The dashboard is httpapi/console, mounted here with the server's
// middleware (authentication, metrics, panics) and run by Server.Run; the
// operator endpoints (/admin/status types, the actuator, /lastn) are
// httpapi/ops; httpapi/httpkit holds the few helpers they share.
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
// httpapi/edge guards every route but /livez and /readyz once users
// (Config.Auth) or a peer secret (Config.PeerVerifier) are configured, and
// bounds what connections can hold (body read deadline, write deadlines
// that move with the reader's progress, a connection limit); the server
// mounts it as the first middleware and hands it each connection.
//
// errors.go is the one place that turns errors into status codes: bad input
// of any kind is a 4xx with a one-line plain-text reason and changes
// nothing; handler panics become a 500 and a log line, never a crash.
package httpapi
