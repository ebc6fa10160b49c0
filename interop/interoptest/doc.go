// Package interoptest is what the interop tests share: the muster binary
// run as a process (Node), other processes with their output kept line by
// line (Process), and real clients and servers built by their own package
// managers, as their users get them.
//
// Build sources live in the repository (a pom.xml with pinned versions, a
// package.json with its package-lock.json, a requirements.txt with pinned
// versions); what the package managers download and build goes to a cache
// outside the repository (CacheRoot: $MUSTER_INTEROP_CACHE, else
// $XDG_CACHE_HOME/muster-interop, else ~/.cache/muster-interop), keyed by a
// hash of the sources, so a source change rebuilds and an unchanged one is
// built once per machine. A Maven module may take sources from folders
// beside it (its pom.xml names ${project.basedir}/../<folder>, as
// interop/spring's client apps and drivers share interop/spring/shared):
// those are hashed and copied with it. A file lock makes test binaries that run side by
// side wait for one build instead of racing it.
//
// Where a toolchain is missing or a registry cannot be reached, Build
// returns an *Unavailable error and the test helpers skip with one line
// saying why; any other build failure (a wrong version, a compile error in
// a test app) fails the test. scripts/test.sh runs `go run
// ./interop/interoptest/prebuild` before `go test`, so that downloads on a
// new machine are not charged to a test's timeout.
package interoptest
