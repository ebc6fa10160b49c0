package replication

import (
	"context"
	"net"
)

// DialTLSFunc opens a TLS connection to a peer (for
// http.Transport.DialTLSContext): the caller's TLS identity, the trust
// bundle peers are verified against, and certificate rotation live behind
// it.
type DialTLSFunc func(ctx context.Context, network, addr string) (net.Conn, error)
