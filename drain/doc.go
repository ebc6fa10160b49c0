// Package drain is the drain with a receipt (docs/traffic.md): an operator
// drains an instance before it stops (POST /admin/drain/{app}/{id}, the
// console, muster drain), every node serves it OUT_OF_SERVICE (the
// registry's drain mark, registry/drain.go), and the receipt says when
// every reader that read the app lately has read it again since.
//
// It owns two things:
//
//  1. The reader table (Readers): each node notes who read which app, when
//     and at which registry version, on every read the Eureka API, DNS
//     and xDS serve to a client (never a peer's). The read path finds its
//     reader under a read lock and stores atomics: no allocation once the
//     reader is known. The table is capped (muster.drain.max-readers).
//  2. The receipt (Drainer): this node's readers and every peer's (asked
//     over the peer endpoint POST peerreplication/drain-readers), each node
//     judging its readers against the registry version at which it applied
//     the mark itself, so a read served from a payload built before the
//     change never confirms. A drain may wait (?wait=) until every reader
//     confirmed, polling every PollInterval.
//
// It imports only the registry; the HTTP layer and the node wire it.
package drain
