package registry

// Log keys (STYLE.md §5): one spelling per key, so that a search of the
// logs for app=ORDERS finds every line of the registry.
const (
	logComponent       = "component"
	logApp             = "app"
	logInstanceID      = "instance_id"
	logOrigin          = "origin"
	logStatus          = "status"
	logFrom            = "from"
	logTo              = "to"
	logEvicted         = "evicted"
	logExpired         = "expired"
	logNeverRenewed    = "never_renewed"
	logCompensation    = "compensation"
	logLimit           = "limit"
	logRenewsLastMin   = "renews_last_min"
	logRenewsThreshold = "renews_threshold"
	logExpectedRenews  = "expected_renews_per_min"
	logRecount         = "recount"
	logInstances       = "instances"
	logHealthMarked    = "health_marked"
	logPeer            = "peer"
	logHeld            = "held"
	logDrained         = "drained"
	logNotKept         = "not_kept"
)
