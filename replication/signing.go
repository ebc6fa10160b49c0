package replication

import (
	"net/http"
)

// RequestSigner authenticates a request this node sends to a peer: a batch
// (body is the encoded batch) or a syncUp fetch (body is nil). It adds
// headers and must be safe for concurrent use. cmd/muster passes
// auth.PeerSigner.Sign when cluster.peer-secret is set. Credentials in a
// static peer's URL (http://user:pass@host/eureka/) are sent as HTTP Basic
// by net/http itself, to that URL only: peer requests never follow
// redirects, so neither those credentials nor a signature go anywhere else.
type RequestSigner func(req *http.Request, body []byte)

// noRedirects keeps peer requests, and the credentials they carry, at the
// URL they were meant for.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
