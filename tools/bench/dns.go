package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/muster-registry/muster/tools/loadgen"
)

// ---- DNS interface ----
//
// The node's DNS interface (muster.dns.*) against a bare miekg/dns server
// in the ceiling process that serves the very answers the node gives to
// the fleet's A and SRV names, packed once per name (dnsCeilingSets):
// queries/s, latency and server CPU per query over UDP, for A and SRV
// names of random fleet apps (50 instances each) at 10k and 100k
// instances; then the answer size and time of a 1,000-instance app.

// benchDNSConc is the number of UDP clients, one socket and one query in
// flight each.
const benchDNSConc = 32

// benchDNSBigApp is the app of the answer-size figure.
const (
	benchDNSBigApp = "DNS-BIG"
	benchDNSBigN   = 1000
)

// dnsCeilingSet is one name's answer as the ceiling serves it, packed
// when the ceiling starts: the header and question, then one unit per
// instance (its answer record and, for SRV, its target's address). Per
// query the ceiling only shuffles, copies the units that fit, and patches
// the ID and counts: the least work that serves the bytes Muster serves.
type dnsCeilingSet struct {
	head   []byte // header (ID, flags, counts patched) and question
	srv    bool
	an, ad [][]byte
}

// dnsCeilingTTL is the TTL of the node's answers (muster.dns.ttl-seconds'
// default, which the scenario keeps).
const dnsCeilingTTL = 5

// dnsCeilingSets packs, for the fleet's instances [0, n), the answers the
// node gives to each app's A and SRV names (<app>.app.muster.,
// _<app>._tcp.app.muster.) with the layout of the node's packed answers
// (dns/packed.go): A records and SRV records owned by a pointer to the
// question, SRV targets <hex-ip>.addr.muster. uncompressed, each SRV
// record's A in the additional section owned by a pointer to its target.
func dnsCeilingSets(n int) map[string]*dnsCeilingSet {
	u16 := binary.BigEndian.AppendUint16
	rr := func(b []byte, t uint16, rdlen int) []byte {
		b = u16(b, t)
		b = u16(b, mdns.ClassINET)
		b = binary.BigEndian.AppendUint32(b, dnsCeilingTTL)
		return u16(b, uint16(rdlen))
	}
	head := func(name string, t uint16) []byte {
		b := make([]byte, 12, 12+len(name)+6)
		b, _ = appendWireName(b, name)
		b = u16(b, t)
		return u16(b, mdns.ClassINET)
	}
	sets := map[string]*dnsCeilingSet{}
	for first := 0; first+benchPerApp <= n; first += benchPerApp {
		app := strings.ToLower(benchAppName(first))
		a := &dnsCeilingSet{head: head(app+".app.muster.", mdns.TypeA)}
		srv := &dnsCeilingSet{head: head("_"+app+"._tcp.app.muster.", mdns.TypeSRV), srv: true}
		for i := first; i < first+benchPerApp; i++ {
			x, y, z := benchAddr(i)
			ip := []byte{10, byte(x), byte(y), byte(z)}
			a.an = append(a.an, append(rr([]byte{0xC0, 12}, mdns.TypeA, 4), ip...))
			target, _ := appendWireName(nil, hex.EncodeToString(ip)+".addr.muster.")
			an := rr([]byte{0xC0, 12}, mdns.TypeSRV, 6+len(target))
			an = u16(u16(u16(an, 0), 1), 8080) // priority, weight, port
			srv.an = append(srv.an, append(an, target...))
			srv.ad = append(srv.ad, append(rr(nil, mdns.TypeA, 4), ip...))
		}
		sets[app+".app.muster."] = a
		sets["_"+app+"._tcp.app.muster."] = srv
	}
	return sets
}

// appendWireName packs a name with no escapes.
func appendWireName(b []byte, name string) ([]byte, error) {
	buf := make([]byte, 256)
	off, err := mdns.PackDomainName(name, buf, 0, nil, false)
	return append(b, buf[:off]...), err
}

// dnsCeilingBuf is the ceiling's per-answer scratch, pooled.
type dnsCeilingBuf struct {
	b   []byte
	idx []int
	rng rand.PCG
}

// serve writes set's answer to q: every unit in random order, as many as
// fit in the size the query offers (EDNS0, at most 1232 as the node's
// muster.dns.udp-max-size; 512 without), TC when not all do.
func (set *dnsCeilingSet) serve(w mdns.ResponseWriter, q *mdns.Msg, cb *dnsCeilingBuf) {
	size, optLen := mdns.MinMsgSize, 0
	opt := q.IsEdns0()
	if opt != nil {
		size, optLen = max(size, min(int(opt.UDPSize()), 1232)), 11
	}
	n := len(set.an)
	idx := cb.idx[:0]
	for i := range n {
		idx = append(idx, i)
	}
	for i := range n {
		j := i + int((cb.rng.Uint64()>>32)*uint64(n-i)>>32)
		idx[i], idx[j] = idx[j], idx[i]
	}
	cb.idx = idx
	b := append(cb.b[:0], set.head...)
	l, fit := len(b)+optLen, 0
	for _, i := range idx {
		ul := len(set.an[i])
		if set.srv {
			ul += 2 + len(set.ad[i])
		}
		if l+ul > size {
			break
		}
		l += ul
		fit++
	}
	t := len(b)
	for _, i := range idx[:fit] {
		b = append(b, set.an[i]...)
	}
	ar := 0
	if set.srv {
		ar = fit
		for _, i := range idx[:fit] {
			target := t + 18
			b = append(b, 0xC0|byte(target>>8), byte(target))
			b = append(b, set.ad[i]...)
			t += len(set.an[i])
		}
	}
	if opt != nil {
		b = append(b, 0, 0, 41, 1232>>8, 1232&255, 0, 0, 0, 0, 0, 0)
		ar++
	}
	flags := uint16(1<<15 | 1<<10) // QR, AA
	if fit < n {
		flags |= 1 << 9
	}
	if q.RecursionDesired {
		flags |= 1 << 8
	}
	if q.CheckingDisabled {
		flags |= 1 << 4
	}
	binary.BigEndian.PutUint16(b[0:], q.Id)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint16(b[4:], 1)
	binary.BigEndian.PutUint16(b[6:], uint16(fit))
	binary.BigEndian.PutUint16(b[10:], uint16(ar))
	cb.b = b
	_, _ = w.Write(b)
}

// dnsCeilingServe serves on addr (UDP) the very answers the node gives to
// the A and SRV names of the fleet's apps (up to benchBigN instances),
// packed once per name; other questions get NXDOMAIN.
func dnsCeilingServe(addr string) (*mdns.Server, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	sets := dnsCeilingSets(benchBigN)
	bufs := sync.Pool{New: func() any {
		cb := &dnsCeilingBuf{b: make([]byte, 0, 1232)}
		cb.rng.Seed(rand.Uint64(), rand.Uint64())
		return cb
	}}
	handler := mdns.HandlerFunc(func(w mdns.ResponseWriter, q *mdns.Msg) {
		if len(q.Question) == 1 {
			if set := sets[q.Question[0].Name]; set != nil && q.Question[0].Qtype == binary.BigEndian.Uint16(set.head[len(set.head)-4:]) {
				cb := bufs.Get().(*dnsCeilingBuf)
				set.serve(w, q, cb)
				bufs.Put(cb)
				return
			}
		}
		r := new(mdns.Msg)
		r.SetRcode(q, mdns.RcodeNameError)
		_ = w.WriteMsg(r)
	})
	srv := &mdns.Server{PacketConn: pc, Handler: handler}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	return srv, nil
}

// benchFreeUDPAddr is a loopback address free right now for UDP and for
// TCP alike: a DNS server listens on both (a free UDP port's TCP twin can
// be a connection's local port on a busy machine).
func benchFreeUDPAddr() (string, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			pc.Close()
			return addr, nil
		}
	}
	return "", errors.New("no loopback port free for both UDP and TCP in 50 tries")
}

// dnsLoad sends queries made by next to addr from benchDNSConc UDP
// clients for d. Answers are counted as status 200 when NOERROR with at
// least one record, 206 when that is truncated (TC), else as 1000+rcode;
// a lost one as an error.
func dnsLoad(ctx context.Context, addr string, d time.Duration, next func(rng *rand.Rand) (string, uint16)) (loadgen.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res := loadgen.Result{Status: map[int]uint64{}, Latency: loadgen.NewHistogram()}
	var mu sync.Mutex // guards res while the workers merge into it
	var wg sync.WaitGroup
	start := time.Now()
	var dialErr error
	for w := range benchDNSConc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := mdns.Dial("udp", addr)
			if err != nil {
				mu.Lock()
				dialErr = err
				mu.Unlock()
				return
			}
			defer c.Close()
			c.UDPSize = mdns.DefaultMsgSize
			mine := loadgen.Result{Status: map[int]uint64{}, Latency: loadgen.NewHistogram()}
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			q := new(mdns.Msg)
			q.SetEdns0(1232, false) // as Go, systemd-resolved and HAProxy (accepted_payload_size) offer
			for ctx.Err() == nil {
				name, qtype := next(rng)
				q.SetQuestion(name, qtype) // a new id; the OPT record stays
				t0 := time.Now()
				_ = c.SetDeadline(t0.Add(time.Second))
				err := c.WriteMsg(q)
				var r *mdns.Msg
				if err == nil {
					r, err = c.ReadMsg()
				}
				if err == nil && r.Id != q.Id {
					err = fmt.Errorf("answer id %d to query %d", r.Id, q.Id)
				}
				if err != nil {
					mine.Errors++
					if mine.FirstErr == nil {
						mine.FirstErr = err
					}
					continue
				}
				mine.Latency.Record(time.Since(t0))
				mine.Requests++
				code := 200
				switch {
				case r.Rcode != mdns.RcodeSuccess || len(r.Answer) == 0:
					code = 1000 + r.Rcode
				case r.Truncated:
					code = 206 // the UDP part answered; a real client goes on over TCP
				}
				mine.Status[code]++
			}
			mu.Lock()
			defer mu.Unlock()
			res.Requests += mine.Requests
			res.Errors += mine.Errors
			res.Latency.Merge(mine.Latency)
			for k, v := range mine.Status {
				res.Status[k] += v
			}
			if res.FirstErr == nil {
				res.FirstErr = mine.FirstErr
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, dialErr
}

// dnsBench is the dns scenario (bench --only dns): its methods share
// the run's environment, benchEnv, and its helpers.
type dnsBench struct{ *benchEnv }

func (e dnsBench) run() error {
	sizes := []int{e.fleetN, e.bigN}
	if e.quick {
		sizes = sizes[:1]
	}
	bareDNS, err := benchFreeUDPAddr()
	if err != nil {
		return err
	}
	bare, err := e.startChild("dns-bare", "bare", "--dns", bareDNS)
	if err != nil {
		return err
	}
	bareDNSAddr := map[*benchChild]string{bare: bareDNS}
	for _, n := range sizes {
		addr, err := benchFreeUDPAddr()
		if err != nil {
			return err
		}
		mu, err := e.startChild("dns-muster-"+benchSize(n), "muster",
			"--set", "muster.dns.enabled=true", "--set", "muster.dns.addr="+addr,
			// The bench is one source asking as fast as it can: no per-source limit.
			"--set", "muster.dns.rate-limit=0", "--set", "muster.dns.max-answers="+strconv.Itoa(benchDNSBigN))
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := e.registerFleet(mu, 0, n); err != nil {
			return err
		}
		e.logf("   registered %d instances in %s", n, time.Since(t0).Round(time.Millisecond))
		bareDNSAddr[mu] = addr
		apps := n / benchPerApp
		kinds := []struct {
			label string
			qtype uint16
			name  func(app string) string
		}{
			{"A", mdns.TypeA, func(app string) string { return app + ".app.muster." }},
			{"SRV", mdns.TypeSRV, func(app string) string { return "_" + app + "._tcp.app.muster." }},
		}
		compare := func(x, y *benchChild, qtype uint16, name func(string) string) (benchSide, benchSide, error) {
			return e.compareWith(x, y, func(c *benchChild, d time.Duration) (loadgen.Result, error) {
				return dnsLoad(e.ctx, bareDNSAddr[c], d, func(rng *rand.Rand) (string, uint16) {
					return name(strings.ToLower(benchAppName(rng.IntN(apps) * benchPerApp))), qtype
				})
			}, nil)
		}
		for _, kind := range kinds {
			m, b, err := compare(mu, bare, kind.qtype, kind.name)
			if err != nil {
				return err
			}
			what := fmt.Sprintf("%s queries (%s instances, %d UDP clients)", kind.label, benchSize(n), benchDNSConc)
			// Issue 43's targets: the ceiling serves the same bytes, so
			// what is left is Muster's own work per query.
			e.addCompared("dns", what+"/s", m.res.RPS(), b.res.RPS(), "queries/s", "≥ 0.8× ceiling",
				benchBool(m.res.RPS() >= 0.8*b.res.RPS()), roundRatios(m, b))
			e.addCompared("dns", what+" latency p50", ms(m.res.Latency.Quantile(0.5)), ms(b.res.Latency.Quantile(0.5)), "ms", "", nil, "")
			e.addCompared("dns", what+" latency p99", ms(m.res.Latency.Quantile(0.99)), ms(b.res.Latency.Quantile(0.99)), "ms", "", nil,
				fmt.Sprintf("max %.1f ms", ms(m.res.Latency.Max())))
			e.addCompared("dns", what+": server CPU per query", m.cpuPerReq(), b.cpuPerReq(), "µs", "≤ 1.3× ceiling",
				benchBool(m.cpuPerReq() <= 1.3*b.cpuPerReq()), "user+system CPU of the server process")
			if bad := m.res.NotOK(); bad > 0 {
				e.add(benchRow{Scenario: "dns", Figure: what + ": failed queries", Value: float64(bad), Target: "0", Met: benchBool(false),
					Note: fmt.Sprintf("answers by code %v (1000+rcode), first error %v", m.res.Status, m.res.FirstErr)})
			}
			if tc := m.res.Status[206]; tc > 0 {
				e.add(benchRow{Scenario: "dns", Figure: what + ": truncated", Value: 100 * float64(tc) / float64(m.res.Requests), Unit: "%",
					Note: "answers past the 1232-byte EDNS0 size, TC set (a client retries over TCP)"})
			}
			if n == sizes[0] && kind.qtype == mdns.TypeA {
				e.add(benchRow{Scenario: "dns", Figure: "ceiling", Note: "a bare miekg/dns server in the ceiling process serving the node's very answers (the same bytes), packed once per name: per query only the shuffle, the records that fit, the ID"})
			}
		}
		if n == sizes[0] {
			if err := e.dnsBigApp(mu, addr); err != nil {
				return err
			}
		}
		mu.stop()
		if n == sizes[0] && !e.smoke {
			if err := e.dnsControl(bare, bareDNSAddr, kinds[0].label, kinds[1].label, func(x, y *benchChild, i int) (benchSide, benchSide, error) {
				return compare(x, y, kinds[i].qtype, kinds[i].name)
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

// dnsControl measures the ceiling against a second ceiling process, the
// same rounds as the node's comparison: with no difference at all between
// the two sides, how far the queries/s and CPU ratios move on this machine
// (the A/A control of the rows above).
func (e dnsBench) dnsControl(bare *benchChild, addrs map[*benchChild]string, labelA, labelSRV string,
	compare func(x, y *benchChild, kind int) (benchSide, benchSide, error)) error {
	addr, err := benchFreeUDPAddr()
	if err != nil {
		return err
	}
	twin, err := e.startChild("dns-bare-twin", "bare", "--dns", addr)
	if err != nil {
		return err
	}
	defer twin.stop()
	addrs[twin] = addr
	for i, label := range []string{labelA, labelSRV} {
		m, b, err := compare(twin, bare, i)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("A/A control: a second ceiling, %s queries (%s instances)", label, benchSize(e.fleetN))
		e.addCompared("dns", what+"/s", m.res.RPS(), b.res.RPS(), "queries/s", "", nil,
			roundRatios(m, b)+"; the same server on both sides: the ratio's noise here")
		e.addCompared("dns", what+": server CPU per query", m.cpuPerReq(), b.cpuPerReq(), "µs", "", nil, "user+system CPU of the server process")
	}
	return nil
}

// dnsBigApp registers a 1,000-instance app and measures its whole SRV and
// A answers over TCP (size and time) and what UDP gets of them.
func (e dnsBench) dnsBigApp(mu *benchChild, addr string) error {
	_, err := e.load(mu, loadgen.Config{Total: benchDNSBigN, Next: func(w int, seq uint64) loadgen.Request {
		body := fmt.Sprintf(`{"instance":{"instanceId":"big-%d","hostName":"big-%d.internal","app":%q,"ipAddr":"10.200.%d.%d","status":"UP",`+
			`"port":{"$":8080,"@enabled":"true"},"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
			`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"vipAddress":"dns-big"}}`, seq, seq, benchDNSBigApp, seq/250, seq%250+1)
		return loadgen.Request{Method: http.MethodPost, Path: "/eureka/apps/" + benchDNSBigApp, Header: benchJSONBodyHeaders, Body: []byte(body)}
	}})
	if err != nil {
		return err
	}
	for _, q := range []struct {
		label string
		name  string
		qtype uint16
	}{
		{"A", "dns-big.app.muster.", mdns.TypeA},
		{"SRV", "_dns-big._tcp.app.muster.", mdns.TypeSRV},
	} {
		tcp := &mdns.Client{Net: "tcp", Timeout: 5 * time.Second}
		h := loadgen.NewHistogram()
		var size, records int
		for range 50 {
			m := new(mdns.Msg)
			m.SetQuestion(q.name, q.qtype)
			r, rtt, err := tcp.Exchange(m, addr)
			if err != nil {
				return fmt.Errorf("TCP %s %s: %w", q.label, q.name, err)
			}
			h.Record(rtt)
			r.Compress = true
			size, records = r.Len(), len(r.Answer)
		}
		if records != benchDNSBigN {
			return fmt.Errorf("TCP %s of the %d-instance app: %d records", q.label, benchDNSBigN, records)
		}
		e.add(benchRow{Scenario: "dns", Figure: fmt.Sprintf("%d-instance app, %s over TCP: answer size", benchDNSBigN, q.label),
			Value: float64(size), Unit: "bytes", Note: fmt.Sprintf("%d records (muster.dns.max-answers=%d)", records, benchDNSBigN)})
		e.add(benchRow{Scenario: "dns", Figure: fmt.Sprintf("%d-instance app, %s over TCP: time p50", benchDNSBigN, q.label),
			Value: ms(h.Quantile(0.5)), Unit: "ms", Note: fmt.Sprintf("p99 %.2f ms, 50 queries, one connection each", ms(h.Quantile(0.99)))})
		udp := &mdns.Client{Net: "udp", Timeout: 2 * time.Second}
		m := new(mdns.Msg)
		m.SetQuestion(q.name, q.qtype)
		m.SetEdns0(1232, false)
		r, _, err := udp.Exchange(m, addr)
		if err != nil {
			return fmt.Errorf("UDP %s %s: %w", q.label, q.name, err)
		}
		e.add(benchRow{Scenario: "dns", Figure: fmt.Sprintf("%d-instance app, %s over UDP (EDNS0 1232)", benchDNSBigN, q.label),
			Value: float64(len(r.Answer)), Unit: "records", Note: fmt.Sprintf("TC=%v: the client retries over TCP", r.Truncated)})
	}
	return nil
}
