package cluster

// Crash stops memberlist without a leave broadcast, as a killed process
// would: peers see this node suspect, then dead. Tests only.
func (c *Cluster) Crash() error { return c.shutdown(false, 0) }
