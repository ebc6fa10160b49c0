package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// pingDelegate is memberlist's PingDelegate. A completed probe means the
// peer answers, so a peer listed as suspect is alive again (see suspect.go).
// memberlist calls it from its probe goroutine; it does not block.
type pingDelegate struct {
	c *Cluster
}

// AckPayload adds nothing to this node's acks.
func (d *pingDelegate) AckPayload() []byte { return nil }

// NotifyPingComplete clears suspicion of other. Only other.Name is read:
// memberlist never rewrites a node's name.
func (d *pingDelegate) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	d.c.unsuspect(other.Name)
}
