//go:build !linux

package edge

import "syscall"

// tcpAckCounter: no portable way to read acknowledged bytes, so responses
// are written in writeChunk pieces.
func tcpAckCounter(syscall.RawConn) ackCounter { return nil }
