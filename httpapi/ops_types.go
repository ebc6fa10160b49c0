package httpapi

import "github.com/muster-registry/muster/httpapi/ops"

// The operator types live in httpapi/ops, so the CLI and the chaos runner
// read them without linking the HTTP layer; these names keep the server's
// code and its users' unchanged.
type (
	AdminStatus         = ops.AdminStatus
	SelfPreservationDoc = ops.SelfPreservationDoc
	RegistryDoc         = ops.RegistryDoc
	PeerInfo            = ops.PeerInfo
	Security            = ops.Security
)

// AntiEntropyOff is ops.AntiEntropyOff.
const AntiEntropyOff = ops.AntiEntropyOff
