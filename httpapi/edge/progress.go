package edge

import (
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"
)

// ackCounter returns how many bytes of a connection the peer has
// acknowledged so far; ok is false when that cannot be read any more.
type ackCounter func() (acked uint64, ok bool)

// ackCounterOf returns the ackCounter of c's TCP connection, or nil where
// the platform or the connection type does not tell (then responses are
// written in writeChunk pieces, each with its own deadline).
func ackCounterOf(c net.Conn) ackCounter {
	for c != nil {
		switch t := c.(type) {
		case *limitConn:
			c = t.Conn
		case *tls.Conn:
			// The TCP acknowledgements count record bytes, a little more
			// than the plaintext: the reader's progress all the same.
			c = t.NetConn()
		case syscall.Conn:
			rc, err := t.SyscallConn()
			if err != nil {
				return nil
			}
			acks := tcpAckCounter(rc)
			if acks == nil {
				return nil
			}
			if _, ok := acks(); !ok { // not TCP (a Unix socket, say)
				return nil
			}
			return acks
		default:
			return nil
		}
	}
	return nil
}

// ackWatch moves a connection's write deadline on while one large write is
// under way, each time the reader has acknowledged another writeChunk: the
// same rule as a deadline per writeChunk written, without a write (and its
// fixed cost) per writeChunk. It looks every eighth of the timeout, and
// allows that eighth on top of each deadline, so a reader exactly at the
// floor is not cut off for being seen late.
type ackWatch struct {
	conn    net.Conn
	acks    ackCounter
	timeout time.Duration

	// mu guards stopped, base and timer.
	mu      sync.Mutex
	stopped bool
	base    uint64 // acknowledged bytes when the deadline last moved
	timer   *time.Timer
}

func watchAcks(conn net.Conn, acks ackCounter, timeout time.Duration) *ackWatch {
	base, ok := acks()
	if !ok {
		return nil
	}
	w := &ackWatch{conn: conn, acks: acks, timeout: timeout, base: base}
	_ = conn.SetWriteDeadline(time.Now().Add(timeout + w.tick()))
	w.mu.Lock()
	w.timer = time.AfterFunc(w.tick(), w.check)
	w.mu.Unlock()
	return w
}

func (w *ackWatch) tick() time.Duration { return max(w.timeout/8, time.Millisecond) }

func (w *ackWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	acked, ok := w.acks()
	if !ok {
		return // the deadline in place stands: the connection is going
	}
	if acked-w.base >= writeChunk {
		w.base = acked
		_ = w.conn.SetWriteDeadline(time.Now().Add(w.timeout + w.tick()))
	}
	w.timer.Reset(w.tick())
}

// stop ends the watch; once it returns the deadline is not touched again.
func (w *ackWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
}
