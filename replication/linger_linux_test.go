//go:build linux

package replication

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// Connections to peers discard unsent data when closed (SO_LINGER 0): the
// close resets the connection, so a batch given up on in a partition is
// not delivered when it heals. Without it the peer would read the bytes
// and then EOF.
func TestPeerDialer_resetsOnClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := PeerDialer(time.Second).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-accepted
	if srv == nil {
		t.Fatal("no connection accepted")
	}
	defer srv.Close()
	if _, err := c.Write([]byte("a batch given up on")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(srv)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading after the dialer closed: %v, want a reset (SO_LINGER 0)", err)
	}
}
