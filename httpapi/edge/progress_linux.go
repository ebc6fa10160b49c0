package edge

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpAckCounter reads tcpi_bytes_acked (TCP_INFO, Linux 4.1 and later).
func tcpAckCounter(rc syscall.RawConn) ackCounter {
	return func() (uint64, bool) {
		var acked uint64
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			var info *unix.TCPInfo
			if info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				acked = info.Bytes_acked
			}
		}); cerr != nil || err != nil {
			return 0, false
		}
		return acked, true
	}
}
