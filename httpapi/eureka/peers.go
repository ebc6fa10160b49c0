package eureka

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/drain"
	"github.com/muster-registry/muster/httpapi/httpkit"
	"github.com/muster-registry/muster/replication"
)

// DrainReadersPath is the peer endpoint a draining node asks for another
// node's readers of the drained instance's app (replication's
// HTTPTransport.DrainReaders), under each base.
const DrainReadersPath = "/peerreplication/drain-readers"

// peerEndpoints are the routes only peers call: replication batches and
// anti-entropy. They share nothing with the client routes but the body
// reader.
type peerEndpoints struct {
	batchHandler BatchHandler
	digests      replication.DigestSource
	drain        *drain.Drainer
}

// drainReaders is POST /peerreplication/drain-readers: this node's readers
// of a drained instance's app, judged on its own applied version of the
// mark (drain.Drainer.Local).
func (s peerEndpoints) drainReaders(c echo.Context) error {
	if s.drain == nil {
		return echo.NewHTTPError(http.StatusNotFound, "drain receipts are not served by this node")
	}
	body, release, err := readBody(c)
	if err != nil {
		return err
	}
	defer release()
	var q drain.Query
	if err := json.Unmarshal(body, &q); err != nil || q.App == "" || q.ID == "" {
		return httpkit.BadRequest("drain-readers: want {\"app\",\"instanceId\",\"drainedAt\"}")
	}
	return c.JSON(http.StatusOK, s.drain.Local(q))
}

// batch is POST /peerreplication/batch.
func (s peerEndpoints) batch(c echo.Context) error {
	if s.batchHandler == nil {
		return echo.NewHTTPError(http.StatusNotImplemented, "peer replication is not enabled on this node")
	}
	body, release, err := readBody(c)
	if err != nil {
		return err
	}
	defer release()
	resp, err := s.batchHandler(body)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, resp)
}

// digest is POST /peerreplication/digest: the registry's anti-entropy
// digests for a peer (replication.AnswerDigest).
func (s peerEndpoints) digest(c echo.Context) error {
	return s.antiEntropyAnswer(c, replication.AnswerDigest)
}

// copies is POST /peerreplication/copies: stored copies for a peer's
// anti-entropy repair (replication.AnswerCopies).
func (s peerEndpoints) copies(c echo.Context) error {
	return s.antiEntropyAnswer(c, replication.AnswerCopies)
}

func (s peerEndpoints) antiEntropyAnswer(c echo.Context, answer func(replication.DigestSource, []byte) ([]byte, error)) error {
	if s.digests == nil {
		return echo.NewHTTPError(http.StatusNotFound, "anti-entropy is not served by this node")
	}
	body, release, err := readBody(c)
	if err != nil {
		return err
	}
	defer release()
	resp, err := answer(s.digests, body)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, resp)
}
