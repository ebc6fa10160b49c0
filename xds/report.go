package xds

import "github.com/muster-registry/muster/report"

// Report is the xDS streams open on this node, for the console (nil
// before Start).
func (s *Server) Report() []report.XDSClient {
	var out []report.XDSClient
	for _, c := range s.Clients() {
		out = append(out, report.XDSClient{Node: c.Node, Cluster: c.Cluster, Zone: c.Zone, Addr: c.Addr, Since: c.Since,
			Incremental: c.Incremental, Types: c.Types, Version: c.Version, NACKs: c.NACKs, LastNACK: c.LastNACK})
	}
	return out
}
