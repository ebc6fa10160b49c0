package replication

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/muster-registry/muster/registry/wire"
)

// An anti-entropy answer over the transport's bound is an error that says
// so, not a cut body that fails to decode.
func TestHTTPTransport_antiEntropyAnswerTooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"root":1,"apps":{"` + strings.Repeat("A", 200) + `":1}}`))
	}))
	defer srv.Close()
	tr, err := NewHTTPTransport(DefaultHTTPTransportConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr.maxResponseBytes = 100
	_, err = tr.Digest(context.Background(), Peer{Name: "p", URL: srv.URL + "/eureka/"}, wire.DigestRequest{})
	if !errors.Is(err, ErrAnswerTooLarge) || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Fatalf("err = %v, want the answer refused as too large", err)
	}
	tr.maxResponseBytes = 1 << 20
	if _, err := tr.Digest(context.Background(), Peer{Name: "p", URL: srv.URL + "/eureka/"}, wire.DigestRequest{}); err != nil {
		t.Fatal(err)
	}
}
