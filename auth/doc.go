// Package auth holds what Muster's edges need to tell who is calling:
// users with Spring-compatible passwords and roles (Authenticator), and the
// HMAC signatures Muster nodes put on the requests they send each other
// (PeerSigner, PeerVerifier). It imports no other project package; httpapi
// checks requests with it and cmd/muster hands the signer to the
// replication transport, so the registry never sees a credential.
//
// Passwords follow Spring Security's DelegatingPasswordEncoder: "{noop}pw"
// and a bare "pw" are plain text (compared in constant time over SHA-256
// digests, so the length does not leak either), "{bcrypt}$2a$…" is a bcrypt
// hash. A bcrypt check costs 50–100 ms of CPU, and every heartbeat carries
// credentials, so after one successful check the authenticator keeps an
// HMAC of the presented password (keyed with a random per-process key) for
// that user; later requests compare that HMAC (about a microsecond). The
// cache holds one entry per configured user, so it is bounded by the
// configuration, and it only ever holds passwords that were right. At most
// GOMAXPROCS/2 (at least one) bcrypt checks run at once, so a flood of
// wrong passwords queues behind itself instead of taking every core.
//
// Peer signatures (scheme "v1"): the sender puts its node name, the time
// (Unix ms) and a random nonce in headers and signs
//
//	"muster-peer-v1" \n method \n path[?query] \n timestamp \n nonce \n node \n hex(sha256(body))
//
// with HMAC-SHA256 under cluster.peer-secret. The secret never travels. The
// receiver recomputes the HMAC (constant-time compare), refuses timestamps
// further than the skew window from its clock, and remembers every
// signature it accepted until that signature would be stale anyway, so a
// captured request cannot be replayed. That memory is bounded: when it is
// full, the oldest signatures are forgotten and everything signed at or
// before them is refused from then on (a moving floor), so a replay is never
// accepted, at the price of refusing very old-but-in-window requests under
// extreme load.
package auth
