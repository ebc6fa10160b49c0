//go:build linux

package healthcheck

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"
)

// rawProbe runs a plain HTTP or a TCP probe with blocking system calls on
// the calling goroutine's thread: socket, connect, write, read, close, and
// three setsockopt calls for the timeouts and the reset on close. Through
// net.Dialer the same probe costs twice the system calls (epoll
// registration, the address look-ups after connect, TCP_NODELAY) and two
// park-and-wake trips through the scheduler, which at 10k probes every
// 10 s is the difference between meeting the 2 % of a core budget and not
// (tools/bench healthcheck). A probe blocks its thread for at most the
// timeout per call (SO_SNDTIMEO bounds connect and write, SO_RCVTIMEO the
// read); at most MaxConcurrent probes run, so at most that many threads
// wait. Cancellation (shutdown) is seen between calls, not inside one.
// HTTPS goes through net and crypto/tls (probe).
func (p *prober) rawProbe(ctx context.Context, t target) (ok bool, result string, handled bool) {
	deadline, _ := ctx.Deadline()
	s, err := p.rawDial(t.addr, deadline)
	if err != nil {
		return false, t.mode.String() + " " + errorClass(err), true
	}
	defer syscall.Close(s.fd)
	if t.mode == ModeTCP {
		return true, "tcp connected", true
	}
	if ctx.Err() != nil {
		return false, "http " + errorClass(ctx.Err()), true
	}
	status, err := httpGet(s, t)
	if err != nil {
		return false, "http " + errorClass(err), true
	}
	return status >= 200 && status < 300, "http " + strconv.Itoa(status), true
}

// rawSock is a connected blocking TCP socket whose calls end at deadline.
type rawSock struct {
	fd       int
	deadline time.Time
}

func (p *prober) rawDial(ap netip.AddrPort, deadline time.Time) (rawSock, error) {
	p.dials.Add(1)
	var sa syscall.Sockaddr
	family := syscall.AF_INET6
	if a := ap.Addr(); a.Is4() {
		family = syscall.AF_INET
		sa = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	} else {
		sa = &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, syscall.IPPROTO_TCP)
	if err != nil {
		return rawSock{}, os.NewSyscallError("socket", err)
	}
	s := rawSock{fd: fd, deadline: deadline}
	tv := syscall.NsecToTimeval(int64(max(time.Until(deadline), time.Millisecond)))
	// Close with a reset, as HAProxy's checks do: no FIN exchange and no
	// TIME_WAIT left behind by every probe (10k instances every 10 s would
	// keep ~60k sockets in TIME_WAIT).
	if err := errors.Join(
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv),
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv),
		syscall.SetsockoptLinger(fd, syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0}),
	); err != nil {
		syscall.Close(fd)
		return rawSock{}, os.NewSyscallError("setsockopt", err)
	}
	for {
		err = syscall.Connect(fd, sa)
		// A signal (the runtime's preemption) interrupts a connect that
		// has a timeout; calling it again waits on the same attempt.
		if (err == syscall.EINTR || err == syscall.EALREADY) && time.Now().Before(deadline) {
			continue
		}
		break
	}
	switch {
	case err == nil || err == syscall.EISCONN:
		return s, nil
	case err == syscall.EINPROGRESS || err == syscall.EINTR || err == syscall.EALREADY:
		err = os.ErrDeadlineExceeded // SO_SNDTIMEO ran out
	}
	syscall.Close(fd)
	return rawSock{}, os.NewSyscallError("connect", err)
}

func (s rawSock) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		n, err := syscall.Write(s.fd, b[written:])
		if n > 0 {
			written += n
		}
		switch {
		case err == syscall.EINTR && time.Now().Before(s.deadline):
			continue
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return written, os.ErrDeadlineExceeded
		case err != nil:
			return written, os.NewSyscallError("write", err)
		}
	}
	return written, nil
}

func (s rawSock) Read(b []byte) (int, error) {
	for {
		n, err := syscall.Read(s.fd, b)
		switch {
		case err == syscall.EINTR && time.Now().Before(s.deadline):
			continue
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return 0, os.ErrDeadlineExceeded
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
