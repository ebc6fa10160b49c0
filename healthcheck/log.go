package healthcheck

// Log keys of the package (snake_case, as the other packages').
const (
	logComponent      = "component"
	logApp            = "app"
	logInstanceID     = "instance_id"
	logFailing        = "failing"
	logProbed         = "probed"
	logMaxDownPercent = "max_down_percent"
	logMarked         = "marked"
	logLifted         = "lifted"
)
