//go:build unix

package registry_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) the test process has used.
// On a machine shared with other work, wall time per operation says how
// busy the other tenants were; CPU time per operation says what the code
// costs, and whether that cost grows when cores contend for it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
