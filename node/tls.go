package node

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// httpErrorLog routes net/http's own messages to the node's log: refused
// TLS handshakes (scanners, clients without a certificate, another CA) at
// debug level, since each connection makes one; the rest as warnings.
func httpErrorLog(logger zerolog.Logger) *log.Logger {
	return log.New(httpErrorWriter{logger.With().Str("component", "http").Logger()}, "", 0)
}

type httpErrorWriter struct{ log zerolog.Logger }

func (w httpErrorWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") {
		w.log.Debug().Msg(msg)
	} else {
		w.log.Warn().Msg(msg)
	}
	return len(p), nil
}
