package main

import (
	"encoding/base64"
	"fmt"
	"net/http"

	"golang.org/x/crypto/bcrypt"

	"github.com/muster-registry/muster/tools/loadgen"
)

// heartbeatAuth measures renewals on a node with HTTP Basic authentication
// on beside open, a node without it that already holds the same fleet, in
// one run and with the same requests (the open node ignores the
// Authorization header). The password is a bcrypt hash at the default cost,
// as a Spring team would configure it: after the first check the node
// recognises it from its cache, so the ratio is what authentication costs
// per request.
func (e heartbeatBench) heartbeatAuth(open *benchChild, n int) error {
	const user, password = "bench", "bench-password"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	secured, err := e.startChild("heartbeat-auth", "muster",
		"--set", "spring.security.user.name="+user, "--set", "spring.security.user.password={bcrypt}"+string(hash))
	if err != nil {
		return err
	}
	authLine := "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password)) + "\r\n"
	f := benchFleetOf(n)
	// The first registration alone: until the node has checked the
	// password once, every request that arrives runs bcrypt (64 at once
	// took 10 s of the two cores); the registrations are not measured.
	for _, part := range []struct{ from, total, conc int }{{0, 1, 1}, {1, n - 1, e.conc}} {
		from, total := part.from, part.total
		res, err := e.load(secured, loadgen.Config{Total: uint64(total), Concurrency: part.conc, Next: func(w int, seq uint64) loadgen.Request {
			r := f.register(from + int(seq))
			r.Header += authLine
			return r
		}})
		if err != nil {
			return err
		}
		if res.NotOK() > 0 {
			return fmt.Errorf("registering %d instances with credentials: %d failed (statuses %v)", total, res.NotOK(), res.Status)
		}
	}
	header := benchClientHeaders + authLine
	cfg := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(n)], Header: header}
	}}
	m, o, err := e.compare(secured, open, cfg, nil)
	if err != nil {
		return err
	}
	e.addCompared("heartbeat", "renewals with basic auth (bcrypt) beside open/s", m.res.RPS(), o.res.RPS(), "req/s", "", nil,
		"ceiling = the same node with auth off; "+roundRatios(m, o))
	e.addCompared("heartbeat", "server CPU per renewal, auth beside open", m.cpuPerReq(), o.cpuPerReq(), "µs", "", nil, "user+system CPU of the server process")
	if bad := m.res.NotOK(); bad > 0 {
		e.add(benchRow{Scenario: "heartbeat", Figure: "failed requests with auth", Value: float64(bad), Target: "0", Met: benchBool(false),
			Note: fmt.Sprintf("statuses %v, first error %v", m.res.Status, m.res.FirstErr)})
	}
	return nil
}
