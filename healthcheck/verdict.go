package healthcheck

import (
	"time"

	"github.com/muster-registry/muster/registry"
)

// The decisions of a round, as pure functions of what the round knows:
// Round (checker.go) gathers their inputs, probes and writes.

// fate is what a round does with one instance of the snapshot.
type fate uint8

const (
	fateNone   fate = iota // nothing: another node's and unmarked, or not probed and unmarked
	fateOthers             // another node's, probed there and marked: counts for the guard
	fateLift               // this node's, no longer probed (checks off, or not UP): its mark goes
	fateProbe              // this node's: probed, unless its target breaks the address rules
)

// fateOf says what a round does with an instance from its check mode, the
// status its client gives it, whether it is marked down by a health check
// and whether this node owns it. eligible says whether health checks
// probe it at all (on whichever node): an instance is probed while its
// client says UP, or while it is marked, so that the mark can be lifted.
func fateOf(m Mode, status registry.Status, marked, owned bool) (f fate, eligible bool) {
	eligible = m != ModeOff && (status == registry.StatusUp || marked)
	switch {
	case !owned && marked && eligible:
		return fateOthers, eligible
	case !owned:
		return fateNone, eligible
	case eligible:
		return fateProbe, eligible
	case marked:
		return fateLift, eligible
	}
	return fateNone, eligible
}

// carryOver is the state an instance this node probes starts the round
// from: a copy of the previous round's while its target is the same
// (Report reads the previous states meanwhile: the round writes its own
// copy, never prev), else a fresh one that keeps the registry's mark in
// force, so that a takeover (or a moved target) does not lift a mark
// without the streak that lifts it.
func carryOver(prev *state, t target, mark *registry.HealthMark, now time.Time) state {
	if prev != nil && prev.target == t {
		return *prev
	}
	st := state{target: t, since: now}
	if mark != nil {
		st.down, st.reason, st.since = true, mark.Reason, time.UnixMilli(mark.Since)
	}
	return st
}

// guardedApps is the guard: the apps none of whose failures this round
// may mark down, because marking them would put more than maxDownPercent
// of the app's probed instances (eligible, cluster-wide) down by health
// checks, counting those other nodes have marked already. A whole app
// failing at once is more likely the checker's network than the app.
func guardedApps(failing, eligible, markedOthers map[string]int, maxDownPercent int) map[string]bool {
	guarded := map[string]bool{}
	for app, n := range failing {
		if e := eligible[app]; e > 0 && (n+markedOthers[app])*100 > maxDownPercent*e {
			guarded[app] = true
		}
	}
	return guarded
}

// streak is an instance's run of probe results and whether it is down.
type streak struct {
	failures  int // failed rounds in a row
	successes int // passed rounds in a row
	down      bool
}

// next is the streak after one probe result: failuresBeforeDown failures
// in a row mark it down (unless the guard holds its app), and
// successesBeforeUp successes in a row lift the mark. restart says that
// the time the streak reports as its start moves to now: a new run of
// successes, a first failure while up, or a flip.
func (s streak) next(ok, guarded bool, failuresBeforeDown, successesBeforeUp int) (n streak, restart bool) {
	n = s
	if ok {
		restart = s.successes == 0
		n.successes++
		n.failures = 0
		if n.down && n.successes >= successesBeforeUp {
			n.down, restart = false, true
		}
		return n, restart
	}
	restart = s.failures == 0 && !s.down
	n.failures++
	n.successes = 0
	if !n.down && n.failures >= failuresBeforeDown && !guarded {
		n.down, restart = true, true
	}
	return n, restart
}
