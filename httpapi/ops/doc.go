// Package ops holds what the operator endpoints answer: the body of
// GET /admin/status (AdminStatus and its parts, PeerInfo, Security) and the
// words it uses (AntiEntropyOff, PeerInfo.SyncLabel). These are the types
// `muster status`, `muster members` and the chaos runner read, so they import
// this small package and not the whole HTTP layer; httpapi serves them.
package ops
