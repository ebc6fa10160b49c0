// Command pipe joins its standard input and output to a TCP address. The
// chaos runner copies it (static, CGO_ENABLED=0) into a node's container
// and runs it with docker exec -i, one per connection, so the harness can
// call a node that is cut off from the network through the node's own
// loopback (scripts/chaos/tunnel.go). The image is FROM scratch: there is
// no shell, socat or curl to do this.
//
//	pipe 127.0.0.1:8761
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pipe host:port")
		os.Exit(2)
	}
	conn, err := net.Dial("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pipe:", err)
		os.Exit(1)
	}
	go func() {
		_, _ = io.Copy(conn, os.Stdin)
		// The caller is done sending; the server may still answer.
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(os.Stdout, conn)
}
