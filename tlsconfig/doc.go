// Package tlsconfig gives a node its TLS identity from PEM files, the way
// Spring Boot's server.ssl.certificate, server.ssl.certificate-private-key
// and server.ssl.trust-certificate name them, or from Java keystores
// (server.ssl.key-store, key-alias, trust-store…: PKCS12 through
// software.sslmate.com/src/go-pkcs12, JKS through keystore-go), and keeps
// it current while the node runs.
//
// A Store holds the certificate/key pair and the trust bundle (the CA
// certificates peers and clients are verified against). ServerConfig is
// the listener's tls.Config; DialTLSContext dials peers (replication,
// syncUp) verifying them against the trust bundle and presenting the
// node's own certificate, which is mutual TLS when the peers require it.
//
// # Rotation
//
// Run re-reads the files (PEM or keystores) every ReloadInterval (default
// 10 s) and swaps in what changed. Both sides ask the Store at every handshake
// (tls.Config.GetConfigForClient on the server, a fresh client config per
// dial), so new connections see a rotated certificate at once, while
// connections already established keep theirs and are never dropped. A new
// pair that does not load (a key that does not match the certificate, a
// file half written, a bundle without certificates) keeps the previous
// identity and is reported once to the logger, at error level, until the
// files change again.
//
// NewCA and NewCert make an ECDSA P-256 CA and certificates signed by it
// for `muster tls`.
package tlsconfig
