package httpapi

import (
	"github.com/muster-registry/muster/httpapi/console"
	"github.com/muster-registry/muster/httpapi/ops"
)

// The operator types live in httpapi/ops, so the CLI and the chaos runner
// read them without linking the HTTP layer; these names keep the server's
// code and its users' unchanged.
type (
	PeerInfo         = ops.PeerInfo
	XDSClient        = ops.XDSClient
	Security         = ops.Security
	NodeInfo         = ops.NodeInfo
	AntiEntropyStats = ops.AntiEntropyStats
	ReplicationStats = ops.ReplicationStats
)

// AntiEntropyOff is ops.AntiEntropyOff.
const AntiEntropyOff = ops.AntiEntropyOff

// The console's actions policy lives in httpapi/console.
type ConsoleActionsPolicy = console.ActionsPolicy

// ConsoleActionsPolicies is console.ActionsPolicies.
var ConsoleActionsPolicies = console.ActionsPolicies
