package redact

import (
	"net/url"
	"strings"
)

// Unparsable stands in for a URL that does not parse and may hold a
// password in a place that cannot be found.
const Unparsable = "(unparsable URL)"

// URL returns raw with its password replaced by "xxxxx". A URL without
// credentials comes back exactly as given (not re-encoded by net/url), so
// it can name a peer. One that does not parse still loses everything
// between "://" and the last "@"; if it has an "@" but no "://", the whole
// of it is withheld.
func URL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.User == nil {
			return raw
		}
		return u.Redacted()
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return scheme + "://xxxxx@" + rest[at+1:]
		}
		return raw
	}
	if strings.Contains(raw, "@") {
		return Unparsable
	}
	return raw
}
