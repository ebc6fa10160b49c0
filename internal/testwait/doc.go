// Package testwait is the one poll helper of the project's tests: it waits
// for a condition that real I/O (a socket, a process, gossip) makes true,
// with a deadline and a failure that names what was awaited and why it
// still did not hold. Code whose time is injected moves its clock instead
// and never needs this package.
package testwait
