package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
)

// pipePath is where the pipe command (scripts/chaos/pipe) lands in a
// node's container.
const pipePath = "/chaos-pipe"

// tunnel is a local listener whose every connection is carried to a
// node's own 127.0.0.1:8761 by a `docker exec -i … /chaos-pipe`: the
// harness reaches the node, https and all, even while it is disconnected
// from every network, and through the same kind of keep-alive connections
// as through a published port (docker exec per request would take
// ~100 ms each and could not carry writes: `muster health` only reads).
type tunnel struct {
	ln   net.Listener
	base string // https://127.0.0.1:<port>, valid for the node's certificate
}

// openTunnel builds the pipe command, copies it into the service's
// container and starts listening.
func (b *bench) openTunnel(ctx context.Context, service string) (*tunnel, error) {
	id, err := b.container(ctx, service)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "muster-chaos-pipe")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "chaos-pipe")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./scripts/chaos/pipe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the pipe command: %w: %s", err, out)
	}
	if _, err := run(ctx, "docker", "cp", bin, id+":"+pipePath); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &tunnel{ln: ln, base: fmt.Sprintf("https://127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go t.carry(id, conn)
		}
	}()
	return t, nil
}

// carry runs one docker exec for one connection. Stdin is copied by hand:
// exec.Cmd would wait for a copy from a net.Conn that only ends when the
// caller closes it, long after the node has closed its side.
func (t *tunnel) carry(container string, conn net.Conn) {
	defer conn.Close()
	cmd := exec.Command("docker", "exec", "-i", container, pipePath, "127.0.0.1:8761")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	cmd.Stdout = conn
	if err := cmd.Start(); err != nil {
		return
	}
	go func() {
		_, _ = io.Copy(stdin, conn)
		_ = stdin.Close()
	}()
	_ = cmd.Wait()
}

// close stops accepting; connections already carried end with the
// scenario's cluster.
func (t *tunnel) close() {
	_ = t.ln.Close()
}
