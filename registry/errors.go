package registry

import "errors"

// Errors callers branch on. StatusCode maps them to the HTTP status the
// matching Eureka request answers.
var (
	ErrInstanceNotFound = errors.New("registry: instance not found")
	ErrInvalidStatus    = errors.New("registry: invalid status")
	ErrInvalidInstance  = errors.New("registry: invalid instance")
	// ErrNewerDirtyTimestamp: the caller holds newer instance data than the
	// registry and must register again (Eureka answers 404).
	ErrNewerDirtyTimestamp = errors.New("registry: caller's lastDirtyTimestamp is newer, register again")
	// ErrStaleDirtyTimestamp: a peer replicated a heartbeat with older data;
	// the registry's copy (returned with it) should win (Eureka answers 409).
	ErrStaleDirtyTimestamp = errors.New("registry: caller's lastDirtyTimestamp is older than the registry's")
	// ErrStatusUnknown: the override rules resolve the instance's status to
	// UNKNOWN, so the client must register again (Eureka answers 404).
	ErrStatusUnknown = errors.New("registry: status resolves to UNKNOWN, register again")
	// ErrInvalidOp: an operation of a kind Apply does not take (an
	// eviction, or no kind at all).
	ErrInvalidOp = errors.New("registry: invalid operation")
)

// errorStatus is the one error → status table: httpapi answers client
// requests with it and replication.Receiver answers each replicated item
// with it, so a peer's item gets exactly what the matching client request
// would. The numbers are HTTP status codes (the registry does no HTTP).
var errorStatus = []struct {
	err    error
	status int
}{
	// Eureka's "not found, register again" (InstanceResource#renewLease).
	{ErrInstanceNotFound, 404},
	{ErrStatusUnknown, 404},
	{ErrNewerDirtyTimestamp, 404},
	// A peer's older data: ours wins and goes back with the 409.
	{ErrStaleDirtyTimestamp, 409},
	// Limits (limits.go), the specific ones before ErrLimitExceeded, which
	// they wrap: a full node is unavailable (a client tries another), a
	// full app is refused, anything else over a limit is bad input.
	{ErrCapacity, 503},
	{ErrAppFull, 403},
	{ErrPersistentFull, 403},
	{ErrLimitExceeded, 400},
	// Bad input is a 400, never a 500 (EUREKA.md bug 13).
	{ErrInvalidInstance, 400},
	{ErrInvalidStatus, 400},
	{ErrInvalidOp, 400},
}

// StatusCode returns the HTTP status for err: 200 for nil, the table's
// status for a registry error (matched with errors.Is), and ok false for
// any other error, which the caller maps (or answers 500).
func StatusCode(err error) (status int, ok bool) {
	if err == nil {
		return 200, true
	}
	for _, e := range errorStatus {
		if errors.Is(err, e.err) {
			return e.status, true
		}
	}
	return 500, false
}
