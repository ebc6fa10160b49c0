//go:build !unix

package replication

import "syscall"

// dropUnsentOnClose is a no-op where SO_LINGER cannot be set this way.
func dropUnsentOnClose(_, _ string, _ syscall.RawConn) error { return nil }
