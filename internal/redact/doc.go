// Package redact owns the one way Muster hides credentials in a URL before
// it goes into a log line, an error, a status page or a peer's name: the
// client library, replication, the tools and the server binary all call it,
// so a URL that does not parse cannot leak its password through one of them.
package redact
