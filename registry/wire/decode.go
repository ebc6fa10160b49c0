package wire

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/muster-registry/muster/registry"
)

// ErrMalformed is wrapped by every decode error. The rest of the message is
// a short reason, led by the path of the offending field when there is one,
// e.g. "wire: malformed body: port: want a number, got \"abc\"".
var ErrMalformed = errors.New("wire: malformed body")

// decodeError is a decoding failure. path is the field it is about, such
// as "application[1].instance[0].port": a reader creates a field error
// with an empty path at the value it could not take, and every enclosing
// object and array puts its key or index in front (addPath). An error
// about the body as a whole keeps an empty path.
type decodeError struct {
	path, reason string
}

func (e *decodeError) Error() string {
	if e.path == "" {
		return ErrMalformed.Error() + ": " + e.reason
	}
	return ErrMalformed.Error() + ": " + e.path + ": " + e.reason
}

func (e *decodeError) Unwrap() error { return ErrMalformed }

func malformed(path, format string, args ...any) error {
	return &decodeError{path: path, reason: fmt.Sprintf(format, args...)}
}

// fieldError is a wrong-typed or invalid value at the reader's cursor.
func fieldError(format string, args ...any) error {
	return malformed("", format, args...)
}

// syntaxError is a body that is not well-formed JSON or XML. Its reason
// says where, so addPath leaves it alone.
type syntaxError struct{ decodeError }

func newSyntaxError(reason string) error {
	return &syntaxError{decodeError{reason: reason}}
}

// addPath puts a key (".key") or an index ("[i]") in front of the path of
// a field error; other errors pass through.
func addPath(err error, elem string) error {
	var se *syntaxError
	if errors.As(err, &se) {
		return err
	}
	var de *decodeError
	if !errors.As(err, &de) {
		return err
	}
	if elem == "" || elem[0] != '[' {
		elem = pathKey(elem)
	}
	switch {
	case de.path == "":
		de.path = elem
	case de.path[0] == '[':
		de.path = elem + de.path
	default:
		de.path = elem + "." + de.path
	}
	return err
}

// pathKey is a key as an error path shows it: as it is when it is short
// and plain, else quoted and cut short, so that a hostile key cannot make
// a huge or multi-line message.
func pathKey(key string) string {
	if key == "" || len(key) > 40 {
		return quoteValue(key)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f || c == '"' {
			return quoteValue(key)
		}
	}
	return key
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// quoteValue quotes a received value for an error message, cut short so
// that a huge body cannot make a huge message.
func quoteValue(s string) string {
	const maxLen = 40
	if len(s) > maxLen {
		return strconv.Quote(s[:maxLen]) + "…"
	}
	return strconv.Quote(s)
}

// Applications is a decoded applications document: a full registry, a
// delta (each instance's ActionType says what changed) or a VIP lookup.
// Apps and their instances keep the document's order; each InstanceView
// carries leaseInfo.lastRenewalTimestamp.
type Applications struct {
	VersionsDelta, Hashcode string
	Apps                    []registry.AppView
}

// Eureka's InstanceInfo defaults, which a body that leaves a field out gets
// (InstanceInfo's field initialisers and private constructor).
const (
	defaultPort       = 7001
	defaultSecurePort = 7002
	defaultCountryID  = 1
)

func newInstance() *registry.Instance {
	return &registry.Instance{
		Status:           registry.StatusUp,
		OverriddenStatus: registry.StatusUnknown,
		Port:             registry.Port{Number: defaultPort, Enabled: true},
		SecurePort:       registry.Port{Number: defaultSecurePort},
		CountryID:        defaultCountryID,
	}
}

// finishInstance applies the rules that need the whole body:
//   - app and appGroupName upper-cased, as InstanceInfo.Builder does;
//   - sid "na" (Eureka's default) stored as "";
//   - a missing dataCenterInfo class filled in from the name;
//   - Spring Cloud's server rule (CloudJacksonJson#updateIfNeeded): an
//     instance whose instanceId is absent or null (idGiven false) but with
//     metadata "instanceId" gets the id hostName:<value>, or <value> if it
//     already starts with the host name. Clients written against a Spring
//     server (e.g. ones copying Spring Cloud's old "metadata.instanceId"
//     convention) rely on it to keep several instances on one host apart.
//     An instanceId sent empty ("" in JSON, <instanceId/> in XML) is not
//     absent: Spring's check is `getInstanceId() == null`, and Eureka's
//     InstanceInfo#getId then falls back to the host name, which is the
//     key such a client (go-micro's plugin, fargo) heartbeats under.
func finishInstance(in *registry.Instance, idGiven bool) {
	in.App = strings.ToUpper(in.App)
	in.AppGroupName = strings.ToUpper(in.AppGroupName)
	if in.Sid == "na" {
		in.Sid = ""
	}
	if in.DataCenterInfo.Name != "" && in.DataCenterInfo.Class == "" {
		in.DataCenterInfo.Class = defaultDataCenterClass(in.DataCenterInfo.Name)
	}
	if in.InstanceID == "" && !idGiven {
		if id, ok := in.Metadata.Get("instanceId"); ok && strings.TrimSpace(id) != "" {
			if strings.TrimSpace(in.HostName) != "" && !strings.HasPrefix(id, in.HostName) {
				id = in.HostName + ":" + id
			}
			in.InstanceID = id
		}
	}
	compactStrings(in)
}

// metadataBuilder collects metadata entries in body order.
type metadataBuilder []registry.KV

// finish sorts the entries by key; when a key repeats, the last value wins,
// as it does when Eureka puts entries in a map.
func (mb metadataBuilder) finish() registry.Metadata {
	if len(mb) == 0 {
		return nil
	}
	md := registry.Metadata(mb)
	slices.SortStableFunc(md, func(a, b registry.KV) int { return cmp.Compare(a.Key, b.Key) })
	out := md[:0]
	for i, kv := range md {
		if i+1 < len(md) && md[i+1].Key == kv.Key {
			continue
		}
		out = append(out, kv)
	}
	return slices.Clip(out)
}

// parseInt parses a decimal integer that fits in bits, around optional
// spaces. Like Jackson's getValueAsLong it also takes an integral number
// written as a float ("8080.0", "1.718e12").
func parseInt(text string, bits int) (int64, bool) {
	text = strings.TrimSpace(text)
	if n, err := strconv.ParseInt(text, 10, bits); err == nil {
		return n, true
	}
	if !strings.ContainsAny(text, ".eE") {
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) {
		return 0, false
	}
	limit := math.Ldexp(1, bits-1)
	if f < -limit || f >= limit {
		return 0, false
	}
	return int64(f), true
}

// parseBool reads a boolean sent as text: "true" in any case is true,
// anything else false, as Java's Boolean.valueOf and Jackson's
// getValueAsBoolean read it.
func parseBool(text string) bool {
	return strings.EqualFold(strings.TrimSpace(text), "true")
}

// insecurePortEnabled and securePortEnabled read a port's enabled flag:
// the insecure port is on unless the flag says "false", the secure port
// only if it says "true" (Converters.InstanceInfoConverter#unmarshal's
// defaults, which Muster applies to JSON too).
func insecurePortEnabled(text string) bool {
	return !strings.EqualFold(strings.TrimSpace(text), "false")
}

func securePortEnabled(text string) bool { return parseBool(text) }

// parseActionType keeps the three action types, in any case; anything else
// is dropped, as Eureka's lookup yields null for it.
func parseActionType(text string) registry.ActionType {
	switch {
	case strings.EqualFold(text, string(registry.ActionAdded)):
		return registry.ActionAdded
	case strings.EqualFold(text, string(registry.ActionModified)):
		return registry.ActionModified
	case strings.EqualFold(text, string(registry.ActionDeleted)):
		return registry.ActionDeleted
	}
	return ""
}

// parseStatus reads a status leniently: unknown names are UNKNOWN, as
// Eureka's decoders read them.
func parseStatus(text string) registry.Status {
	return registry.LenientStatus(strings.TrimSpace(text))
}
