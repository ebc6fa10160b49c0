package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- 8. Abuse: what hostile clients cost the node ----

// abuseBench is the abuse scenario (bench --only abuse): its methods share
// the run's environment, benchEnv, and its helpers.
type abuseBench struct{ *benchEnv }

// run measures the node under two attacks of issue 10:
//   - N connections that each declare a 16 MiB body and send one byte: the
//     RSS they add (nothing is reserved from Content-Length) and how soon
//     the body deadline closes them;
//   - a registration flood refused at muster.max-instances: the heartbeat
//     rate while it runs, next to the quiet rate in alternating rounds.
//
// The node registers itself (eureka.client.register-with-eureka, on by
// default as in Spring), and its own instance counts against
// muster.max-instances like any other: the limit is the fleet plus that
// one, so that the whole fleet fits and every new instance after it is
// refused (with the limit at the fleet's size, the fleet's last
// registration was refused with 503).
func (e abuseBench) run() error {
	deadline := benchPick(e.smoke, 3*time.Second, time.Second)
	limit := e.fleetN
	c, err := e.startChild("abuse-muster", "muster",
		"--set", fmt.Sprintf("muster.max-instances=%d", limit+1), "--set", fmt.Sprintf("muster.body-read-timeout-ms=%d", deadline.Milliseconds()))
	if err != nil {
		return err
	}
	if err := e.abuseSlowConnections(c, benchPick(e.smoke, 50, 10), deadline); err != nil {
		return err
	}
	return e.abuseRefusedFlood(c, limit)
}

func (e abuseBench) abuseSlowConnections(c *benchChild, n int, deadline time.Duration) error {
	before, err := c.mem(true)
	if err != nil {
		return err
	}
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	start := time.Now()
	for range n {
		cn, err := net.Dial("tcp", c.API)
		if err != nil {
			return err
		}
		conns = append(conns, cn)
		fmt.Fprintf(cn, "POST /eureka/peerreplication/batch HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 16<<20)
	}
	time.Sleep(deadline / 3) // the handlers are blocked reading the bodies
	during, err := c.mem(true)
	if err != nil {
		return err
	}
	// Every connection must be answered 408 and closed at the deadline.
	var wg sync.WaitGroup
	closedAfter := make([]time.Duration, n)
	answers := make([]string, n)
	for i, cn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cn.SetReadDeadline(time.Now().Add(10 * deadline))
			line, _ := bufio.NewReader(cn).ReadString('\n')
			answers[i] = strings.TrimSpace(line)
			closedAfter[i] = time.Since(start)
		}()
	}
	wg.Wait()
	worst, answered := time.Duration(0), 0
	for i := range n {
		worst = max(worst, closedAfter[i])
		if strings.HasPrefix(answers[i], "HTTP/1.1 408") {
			answered++
		}
	}
	growth := (float64(during.RSS) - float64(before.RSS)) / (1 << 20)
	const target = 64.0
	e.add(benchRow{Scenario: "abuse", Figure: fmt.Sprintf("RSS growth under %d slow connections", n), Value: growth, Unit: "MiB",
		Target: fmt.Sprintf("≤ %.0f MiB", target), Met: benchBool(growth <= target),
		Note: fmt.Sprintf("each declares a 16 MiB body and sends 1 byte (reserving it would be %d MiB); live heap %+.1f MiB",
			n*16, (float64(during.HeapAlloc)-float64(before.HeapAlloc))/(1<<20))})
	e.add(benchRow{Scenario: "abuse", Figure: "slow connections answered 408 and closed after", Value: worst.Seconds(), Unit: "s",
		Target: fmt.Sprintf("≈ %s (body-read-timeout-ms)", deadline), Met: benchBool(answered == n && worst < deadline+2*time.Second),
		Note: fmt.Sprintf("%d of %d answered 408", answered, n)})
	return nil
}

func (e abuseBench) abuseRefusedFlood(c *benchChild, limit int) error {
	if _, err := e.registerFleet(c, 0, limit); err != nil {
		return err
	}
	f := benchFleetOf(2 * limit)
	heartbeats := loadgen.Config{Next: func(w int, seq uint64) loadgen.Request {
		return loadgen.Request{Method: http.MethodPut, Path: f.hbPaths[seq%uint64(limit)], Header: benchClientHeaders}
	}}
	flood := loadgen.Config{Concurrency: max(e.conc/4, 1), Next: func(w int, seq uint64) loadgen.Request {
		return f.register(limit + int(seq%uint64(limit))) // new instances: all refused, the node is full
	}}
	var quiet, loud benchSide
	var floodRes loadgen.Result
	floodRes.Status = map[int]uint64{}
	run := func(withFlood bool, d time.Duration, record bool) error {
		hb := heartbeats
		hb.Duration = d
		var wg sync.WaitGroup
		var fr loadgen.Result
		var ferr error
		if withFlood {
			fl := flood
			fl.Duration = d
			wg.Add(1)
			go func() { defer wg.Done(); fr, ferr = e.load(c, fl) }()
		}
		cpu0 := c.cpu()
		res, err := e.load(c, hb)
		cpu := c.cpu() - cpu0
		wg.Wait()
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		switch {
		case !record:
		case withFlood:
			loud.add(res, cpu)
			floodRes.Requests += fr.Requests
			floodRes.Elapsed += fr.Elapsed
			for k, v := range fr.Status {
				floodRes.Status[k] += v
			}
		default:
			quiet.add(res, cpu)
		}
		return nil
	}
	if err := run(true, e.warmup, false); err != nil {
		return err
	}
	for r := 0; r < e.rounds; r++ {
		for _, withFlood := range []bool{r%2 == 0, r%2 == 1} {
			if err := run(withFlood, e.dur, true); err != nil {
				return err
			}
		}
	}
	if st, err := c.status(); err != nil || st.Fleet != limit || st.Own != 1 {
		return fmt.Errorf("after the flood: %+v %v (want the fleet of %d and the node's own instance)", st, err, limit)
	}
	ratio := loud.res.RPS() / quiet.res.RPS()
	e.addCompared("abuse", "heartbeats/s while a registration flood is refused", loud.res.RPS(), quiet.res.RPS(), "req/s", "", nil,
		fmt.Sprintf("ceiling = the quiet rate, same node, alternating rounds (%s); ratio %.2f", roundRatios(loud, quiet), ratio))
	floodRate := 0.0
	if floodRes.Elapsed > 0 {
		floodRate = float64(floodRes.Requests) / floodRes.Elapsed.Seconds()
	}
	e.add(benchRow{Scenario: "abuse", Figure: "refused registrations/s during the flood", Value: floodRate, Unit: "req/s",
		Note: fmt.Sprintf("%d flood connections against muster.max-instances=%d (the fleet and the node's own registration); statuses %v", flood.Concurrency, limit+1, floodRes.Status)})
	if bad := loud.res.NotOK(); bad > 0 {
		e.add(benchRow{Scenario: "abuse", Figure: "failed heartbeats during the flood", Value: float64(bad), Target: "0", Met: benchBool(false),
			Note: fmt.Sprintf("statuses %v, first error %v", loud.res.Status, loud.res.FirstErr)})
	}
	return nil
}
