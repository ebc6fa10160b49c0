//go:build unix

package replication

import "syscall"

// dropUnsentOnClose makes closing a connection to a peer reset it and
// discard what is still unsent (SO_LINGER 0), instead of the kernel going
// on retransmitting it. A batch the sender gave up on (its timeout ran out
// in a partition) must not reach the peer when the network heals, long
// after newer writes were sent: it would show a peer, for a moment, a copy
// that a later write (a cancel) had already replaced.
func dropUnsentOnClose(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	})
	if err != nil {
		return err
	}
	return serr
}
