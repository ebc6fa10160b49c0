package replication

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// HeaderReplication marks requests between peers; Eureka compares it with
// "true" exactly (PeerEurekaNode.HEADER_REPLICATION).
const HeaderReplication = "x-netflix-discovery-replication"

// HTTPTransport sends batches over Eureka's wire: POST
// {peer URL}peerreplication/batch with the replication header and a JSON
// ReplicationList.
type HTTPTransport struct {
	client *http.Client
	tr     *http.Transport // client's; UseTLS sets how https peers are dialled
	// maxResponseBytes bounds what a peer may answer.
	maxResponseBytes int64
	sign             RequestSigner // nil: batches go unsigned
}

// NewHTTPTransport returns a transport with the given connect and whole
// request timeouts (eureka.server.peer-node-connect-timeout-ms and
// peer-node-read-timeout-ms) and a keep-alive pool per peer.
func NewHTTPTransport(connectTimeout, requestTimeout time.Duration) *HTTPTransport {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &HTTPTransport{
		client:           &http.Client{Transport: tr, Timeout: requestTimeout, CheckRedirect: noRedirects},
		tr:               tr,
		maxResponseBytes: 64 << 20,
	}
}

// Send implements Transport.
func (t *HTTPTransport) Send(ctx context.Context, p Peer, b Batch) (BatchResult, error) {
	body, err := encodeBatch(b)
	if err != nil {
		return BatchResult{}, fmt.Errorf("encode batch for %s: %w", p.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, joinURL(p.URL, "peerreplication/batch"), bytes.NewReader(body))
	if err != nil {
		return BatchResult{}, fmt.Errorf("batch request to %s: %w", p.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderReplication, "true")
	req.Header.Set("User-Agent", "Muster-Replication")
	if t.sign != nil {
		t.sign(req, body)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return BatchResult{}, err
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, t.maxResponseBytes))
	if err != nil {
		return BatchResult{}, fmt.Errorf("read batch response from %s: %w", p.Name, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return BatchResult{}, &StatusError{Code: resp.StatusCode}
	}
	res, err := decodeBatchResponse(respBody)
	if err != nil {
		// The peer answered but not in a way we understand; retrying the
		// same batch would get the same answer.
		return BatchResult{}, &StatusError{Code: http.StatusBadGateway}
	}
	return res, nil
}

// joinURL appends path to a Eureka base URL, with exactly one slash.
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}
