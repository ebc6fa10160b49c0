package cluster

// Crash stops memberlist without a leave broadcast, as a killed process
// would: peers see this node suspect, then dead. Tests only.
func (c *Cluster) Crash() error { return c.shutdown(false, 0) }

// Joined reports whether a join attempt has succeeded, or no Join is
// configured.
func (c *Cluster) Joined() bool { return c.joined.Load() }

// LocalName is this node's name (Config.NodeName).
func (c *Cluster) LocalName() string { return c.name }
