// Package proccontrol is the control side of a process under benchmark:
// a loopback listener that reports the process's CPU time, its memory after
// GC and CPU or heap profiles, and the one JSON line such a process prints
// when it is ready.
//
// Both processes that tools/bench starts use it: `bench node` (a real
// node, package node) and the bench's own ceiling server, so the two are measured
// the same way. It imports no other Muster package.
package proccontrol
