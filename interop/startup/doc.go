// Package startup holds no code: its tests run muster binaries, several
// at once, through the start-ups where time is the point and only real
// processes on real time show it (issue 42): a cluster started together
// opens reads one client renewal interval plus the margin after its cold
// start, however long the nodes' own self-registrations renew; and
// eureka.server.wait-time-in-ms-when-sync-empty: 0 serves at once when the
// only peer cannot be reached. The in-process versions, on the registry's
// injected clock, are in package node (coldstart_test.go, startup_test.go).
package startup
