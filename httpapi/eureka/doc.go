// Package eureka owns Eureka's REST API under /eureka/, /eureka/v2/ and
// /v2/ (register, heartbeat, cancel, status overrides, metadata, full and
// delta fetches, app, instance and VIP lookups, GET /status), the peer
// endpoints (replication batches, anti-entropy digests and copies) and
// Muster's watches.
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
// Errors are returned to the server's error handler (httpapi/errors.go);
// on the routes clients decode (IsClientRoute) it answers with an empty
// body and the reason in ErrorHeader, as the Java clients need.
package eureka
