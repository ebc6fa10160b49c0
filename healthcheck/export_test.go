package healthcheck

// Dials counts every connection c's probes attempted since the start, for
// the external tests.
func Dials(c *Checker) uint64 { return c.prober.dials.Load() }
