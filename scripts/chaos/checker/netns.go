package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
)

// The network: a namespace mchk-br holding the bridge br0 (the host's
// FORWARD chain drops bridged traffic, so the bridge lives in a namespace
// of its own), one namespace mchk-nI per node (10.77.0.I on eth0, a veth
// to the bridge), and a veth mchk-h from the host (10.77.0.254) to the
// bridge, through which the checker reaches every node. Partitions are nft
// drop rules in the receiving node's namespace matching node addresses
// only, so the checker's traffic is never cut.
const (
	nsPrefix = "mchk-"
	brNS     = "mchk-br"
	hostLink = "mchk-h"
	hostIP   = "10.77.0.254"
)

func nodeNS(i int) string { return fmt.Sprintf("%sn%d", nsPrefix, i) }
func nodeIP(i int) string { return fmt.Sprintf("10.77.0.%d", i) }

func sh(args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// netw is the namespaces of one run and the partition state.
type netw struct {
	n       int
	mu      sync.Mutex
	blocked map[[2]int]bool // from → to dropped at to's input
}

func setupNet(n int) (*netw, error) {
	cleanupNet(n)
	cmds := [][]string{
		{"ip", "netns", "add", brNS},
		{"ip", "-n", brNS, "link", "set", "lo", "up"},
		{"ip", "-n", brNS, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", brNS, "link", "set", "br0", "up"},
		{"ip", "link", "add", hostLink, "type", "veth", "peer", "name", "hb", "netns", brNS},
		{"ip", "-n", brNS, "link", "set", "hb", "master", "br0"},
		{"ip", "-n", brNS, "link", "set", "hb", "up"},
		{"ip", "addr", "add", hostIP + "/24", "dev", hostLink},
		{"ip", "link", "set", hostLink, "up"},
	}
	for i := 1; i <= n; i++ {
		ns, b := nodeNS(i), fmt.Sprintf("b%d", i)
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", brNS, "link", "add", b, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "-n", brNS, "link", "set", b, "master", "br0"},
			[]string{"ip", "-n", brNS, "link", "set", b, "up"},
			[]string{"ip", "-n", ns, "addr", "add", nodeIP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		)
	}
	for _, c := range cmds {
		if err := sh(c...); err != nil {
			cleanupNet(n)
			return nil, err
		}
	}
	w := &netw{n: n, blocked: map[[2]int]bool{}}
	for i := 1; i <= n; i++ {
		if err := w.apply(i); err != nil {
			cleanupNet(n)
			return nil, err
		}
	}
	return w, nil
}

// cleanupNet removes every namespace and link this checker creates; the
// processes still inside a node namespace are ours and are killed first.
func cleanupNet(n int) {
	for i := 1; i <= n; i++ {
		if out, err := exec.Command("ip", "netns", "pids", nodeNS(i)).Output(); err == nil {
			for _, p := range strings.Fields(string(out)) {
				_ = exec.Command("kill", "-9", p).Run()
			}
		}
		_ = exec.Command("ip", "netns", "del", nodeNS(i)).Run()
	}
	_ = exec.Command("ip", "netns", "del", brNS).Run()
	_ = exec.Command("ip", "link", "del", hostLink).Run()
}

// apply rewrites node i's drop rules from the blocked set.
func (w *netw) apply(i int) error {
	var froms []int
	for k := range w.blocked {
		if k[1] == i {
			froms = append(froms, k[0])
		}
	}
	sort.Ints(froms)
	var rs strings.Builder
	rs.WriteString("table inet mchk\ndelete table inet mchk\ntable inet mchk {\n chain in {\n  type filter hook input priority 0; policy accept;\n")
	for _, f := range froms {
		fmt.Fprintf(&rs, "  ip saddr %s drop\n", nodeIP(f))
	}
	rs.WriteString(" }\n}\n")
	cmd := exec.Command("ip", "netns", "exec", nodeNS(i), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rs.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", nodeNS(i), err, out)
	}
	return nil
}

// block drops packets from → to (one way).
func (w *netw) block(from, to int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blocked[[2]int{from, to}] = true
	return w.apply(to)
}

func (w *netw) cut(a, b int) error {
	if err := w.block(a, b); err != nil {
		return err
	}
	return w.block(b, a)
}

// healAll removes every drop rule.
func (w *netw) healAll() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blocked = map[[2]int]bool{}
	var first error
	for i := 1; i <= w.n; i++ {
		if err := w.apply(i); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// linked says whether a and b hear each other both ways.
func (w *netw) linked(a, b int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.blocked[[2]int{a, b}] && !w.blocked[[2]int{b, a}]
}
