package edge

import (
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// The acknowledged bytes are found through the wrappers a node's listener
// puts around a connection (LimitListener, then TLS), and not on
// connections that are not TCP.
func TestAckCounterOf_throughWrappers(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("TCP_INFO is read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() { _, _ = io.Copy(io.Discard, client) }()

	wrapped := tls.Server(&limitConn{Conn: server, release: func() {}}, &tls.Config{})
	acks := ackCounterOf(wrapped)
	if acks == nil {
		t.Fatal("no ack counter through limitConn and tls.Conn")
	}
	before, ok := acks()
	if !ok {
		t.Fatal("ack counter failed")
	}
	if _, err := server.Write(make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	for give := time.Now().Add(10 * time.Second); ; {
		after, ok := acks()
		if !ok {
			t.Fatal("ack counter failed")
		}
		if after-before >= 256<<10 {
			break
		}
		if time.Now().After(give) {
			t.Fatalf("acknowledged %d bytes of 256 KiB the reader took", after-before)
		}
		runtime.Gosched()
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if ackCounterOf(a) != nil {
		t.Error("an ack counter on a pipe")
	}
	uds, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	defer uds.Close()
	uc, err := net.Dial("unix", uds.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	if ackCounterOf(uc) != nil {
		t.Error("an ack counter on a Unix socket")
	}
}
