package replicationtest

import (
	"testing"
	"time"

	"github.com/muster-registry/muster/replication"
)

// HTTPTransport is the real HTTP transport, for tests that replicate over
// loopback (to an httpapi node, or the Eureka API alone): the default
// config with requestTimeout, and edit for more of it.
func HTTPTransport(tb testing.TB, requestTimeout time.Duration, edit ...func(*replication.HTTPTransportConfig)) *replication.HTTPTransport {
	tb.Helper()
	cfg := replication.DefaultHTTPTransportConfig()
	cfg.RequestTimeout = requestTimeout
	for _, e := range edit {
		e(&cfg)
	}
	tr, err := replication.NewHTTPTransport(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}
