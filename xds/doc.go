// Package xds owns Muster's xDS control plane: a gRPC server in every node
// (muster.xds.enabled) that serves the registry to Envoy (CDS and EDS over
// ADS) and to proxyless gRPC clients (LDS, RDS, CDS and EDS for
// xds:///NAME), built on envoyproxy/go-control-plane, state of the world and
// incremental.
//
// It follows the registry through its change stream (a Cursor, no
// polling): each batch of changes read from the stream becomes one
// version, built from per-app pieces cached by the app's version (a change
// rebuilds its own app's resources only) and set in go-control-plane's linear
// caches, which version each resource on its own and wake only the streams
// watching what changed (caches.go). Until the node is open for traffic
// watches are held, so a syncing node serves nothing rather than an empty
// registry. Clients that name a zone in their node locality get
// assignments of their own where their zone's localities are priority 0
// and the others priority 1.
//
// Warm-up (muster.traffic.warmup-seconds, warmup.go): an instance that
// turns UP is served at a share of its weight rising in WarmupSteps steps,
// each step one rebuild of its app, timed on Options.Clock; the cluster of
// an app with a warm-up is RING_HASH, because grpc-go's ROUND_ROBIN
// ignores endpoint weights within a locality (docs/xds.md).
//
// Streams are capped (muster.xds.max-streams: RESOURCE_EXHAUSTED beyond
// it), checked against the node's users when authentication is on (HTTP
// Basic credentials in the "authorization" metadata, or a verified client
// certificate), counted in the node's Prometheus registry and listed for
// the console (Clients). See docs/xds.md.
package xds
