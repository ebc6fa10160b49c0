//go:build !linux

package healthcheck

import "context"

// rawProbe is Linux's blocking-call probe (probe_linux.go); elsewhere
// every probe goes through net.
func (p *prober) rawProbe(context.Context, target) (bool, string, bool) { return false, "", false }
