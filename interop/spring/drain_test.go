package spring

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-registry/muster/internal/testwait"
	"github.com/muster-registry/muster/interop/interoptest"
)

// The rolling restart's knobs. The fetch interval is the Eureka client's
// real setting, shortened from its 30 s default so that a run takes under
// a minute; the control's failures last up to that long per instance.
const (
	drainFetchInterval = "5"                   // the caller's eureka.client.registry-fetch-interval-seconds
	drainCallEvery     = 50 * time.Millisecond // 20 calls a second from the test to the caller
	drainWait          = "60s"                 // muster drain --wait, as in the Kubernetes recipe
	drainAdmin         = "admin"
	drainPassword      = "drain-test-admin-pw"
	drainPeerSecret    = "drain-test-peer-secret-0123456789abcdef"
	drainAppPassword   = "drain-test-app-pw"
)

// restartRun is what one rolling restart counted.
type restartRun struct {
	calls, failed int
	took          time.Duration
	answeredBy    map[string]int // instance id → calls it answered
	failures      []string       // the first few failed calls, for the log
	drains        []string       // each drain step: instance, exit status, how long it waited
}

func (r restartRun) String() string {
	ids := make([]string, 0, len(r.answeredBy))
	for id := range r.answeredBy {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var by []string
	for _, id := range ids {
		by = append(by, fmt.Sprintf("%s=%d", id, r.answeredBy[id]))
	}
	return fmt.Sprintf("%d calls, %d failed, in %s; answered by %s", r.calls, r.failed, r.took.Round(100*time.Millisecond), strings.Join(by, " "))
}

// TestBoot4RollingRestart_drainVersusControl is issue 45's acceptance
// test, the promise of docs/traffic.md's Kubernetes recipe: a Spring Boot
// 4 caller calls a two-instance Spring Boot 4 service by name (a
// @LoadBalanced RestTemplate, no retries) at 20 calls a second while the
// service is restarted one instance at a time, as a Deployment's rollout
// does: stop (SIGTERM: Spring's graceful shutdown and the Eureka client's
// cancel), start a replacement with a new instance id, wait until the
// caller calls it, next. The service registers with one node and the
// caller reads from the other, so the receipt is the cluster's.
//
// The control run has no preStop: the caller keeps calling each stopped
// instance until its next fetch, and those calls fail. The drain run runs
// the preStop hook first, `muster drain --wait 60s APP ID`, and stops the
// instance only when it exits 0 (every reader of the app, the caller
// included, has read the instance OUT_OF_SERVICE): no call fails. Both
// runs' figures are logged side by side (go test -v).
func TestBoot4RollingRestart_drainVersusControl(t *testing.T) {
	c := clients[0]                                    // boot4-restclient
	interoptest.Built(t, interoptest.Source(t, c.src)) // skips here, before any node starts
	runs := map[string]restartRun{}
	t.Run("control", func(t *testing.T) {
		runs["control"] = rollingRestart(t, c, "control", nil)
	})
	t.Run("drain", func(t *testing.T) {
		runs["drain"] = rollingRestart(t, c, "drain", drainWithCLI)
	})
	control, haveControl := runs["control"]
	drain, haveDrain := runs["drain"]
	if haveControl {
		t.Logf("control (no preStop):               %s", control)
	}
	if haveDrain {
		t.Logf("drain (preStop muster drain --wait): %s; %s", drain, strings.Join(drain.drains, "; "))
	}
	if haveControl && control.failed == 0 {
		t.Errorf("the control run had no failed call (%s): the caller's setup hides what the drain is for, so the drain run proves nothing", control)
	}
	if haveDrain && drain.failed != 0 {
		t.Errorf("the drain run had %d failed calls, want 0 (%s):\n%s", drain.failed, drain, strings.Join(drain.failures, "\n"))
	}
}

// drainNodes are two Muster nodes peered with each other (static peers,
// signed replication), with authentication on as in production: the
// service's instances register with the first, the caller reads the
// second, and a drain names both (the first that answers drains
// cluster-wide). Every app process reads as a user of its own (appURL):
// a node tells its readers apart by user and address, and on one
// loopback address the user is what makes each process a reader of its
// own, as each pod's IP does on Kubernetes.
//
// Each run has nodes of its own: a node takes a client that read within
// muster.drain.reader-window-ms for a reader, so the other run's stopped
// caller would be one that never reads again.
func drainNodes(t *testing.T, run string) []*interoptest.Node {
	users := []string{"spring.security.user.name=" + drainAdmin, "spring.security.user.password=" + drainPassword,
		"cluster.peer-secret=" + drainPeerSecret}
	for _, id := range []string{"svc-1", "svc-2", "svc-3", "svc-4", "caller-1"} {
		users = append(users, "muster.auth.users."+run+"-"+id+".password={noop}"+drainAppPassword,
			"muster.auth.users."+run+"-"+id+".role=write")
	}
	return startPeeredPair(t, func(sets ...string) *interoptest.Node {
		return interoptest.NewNode(t, append(slices.Clone(users), sets...)...)
	})
}

// adminURL is the node's base URL with the admin's credentials.
func adminURL(n *interoptest.Node) string {
	return strings.Replace(n.Base(), "://", "://"+drainAdmin+":"+drainPassword+"@", 1)
}

// appURL is the node's Eureka URL as the app process with instance id
// lists it: with the credentials of the user named like the instance.
func appURL(n *interoptest.Node, id string) []string {
	return []string{strings.Replace(n.URL(), "://", "://"+id+":"+drainAppPassword+"@", 1)}
}

// drainStep is what runs before an instance is stopped: the preStop hook.
// It returns a line for the log.
type drainStep func(t *testing.T, nodes []*interoptest.Node, a *app) string

// rollingRestart runs one rolling restart of a fresh two-instance service
// (APP NAME-SVC) under a fresh caller on fresh nodes, with drain (nil:
// none) before each stop, and returns what the calls saw.
func rollingRestart(t *testing.T, c client, name string, drain drainStep) restartRun {
	nodes := drainNodes(t, name)
	svcName := name + "-svc"
	// The service fetches the registry, as Spring apps do by default: each
	// instance is a reader of its own app, and the one stopped before the
	// second drain never reads again. Its cancel at shutdown takes it out
	// of the reader table, so that drain does not wait for it.
	var svcArgs []string
	svcs := []*app{
		startAppAs(t, c, svcName, svcName+"-1", appURL(nodes[0], svcName+"-1"), nil, svcArgs...),
		startAppAs(t, c, svcName, svcName+"-2", appURL(nodes[0], svcName+"-2"), nil, svcArgs...),
	}
	// The caller as the recipe sets it up: the Eureka client hands out only
	// UP instances (its default, which the shared properties turn off for
	// the other scenarios), Spring Cloud LoadBalancer keeps no cache of its
	// own (the shared properties) and does not retry.
	caller := startApp(t, c, name+"-caller", appURL(nodes[1], name+"-caller-1"), nil,
		"--eureka.client.registry-fetch-interval-seconds="+drainFetchInterval,
		"--eureka.client.filter-only-up-instances=true",
		"--spring.cloud.loadbalancer.retry.enabled=false")
	callerSees(t, caller, svcName, ids(svcs))

	load := startCalls(caller, svcName)
	t.Cleanup(func() { load.stop() }) // a failed step leaves no calls running
	start := time.Now()
	for _, a := range svcs {
		waitAnswered(t, caller, load, a.ID)
	}
	var drains []string
	for i := range svcs {
		old := svcs[i]
		if drain != nil {
			drains = append(drains, drain(t, nodes, old))
		}
		old.Stop()
		id := fmt.Sprintf("%s-%d", svcName, i+3)
		svcs[i] = startAppAs(t, c, svcName, id, appURL(nodes[0], id), nil, svcArgs...)
		callerSees(t, caller, svcName, ids(svcs))
		// Seen is not yet called: wait for a call the replacement answered,
		// so that the next stop leaves the caller one instance it uses.
		waitAnswered(t, caller, load, svcs[i].ID)
	}
	run := load.stop()
	run.took = time.Since(start)
	run.drains = drains
	for _, a := range append(svcs, caller) {
		a.Stop()
	}
	t.Logf("%s: %s", name, run)
	if run.failed > 0 {
		t.Logf("%s: the first failed calls:\n%s", name, strings.Join(run.failures, "\n"))
	}
	if run.calls < 100 {
		t.Fatalf("%s: only %d calls over the restart: the load did not run", name, run.calls)
	}
	return run
}

// waitAnswered waits until a call through the caller was answered by id.
func waitAnswered(t *testing.T, caller *app, load *calls, id string) {
	t.Helper()
	testwait.For(t, 30*time.Second, caller.App+" calls "+id, func() error {
		if load.answered(id) == 0 {
			return errors.New("no call answered by it yet")
		}
		return nil
	})
}

func ids(apps []*app) []string {
	var out []string
	for _, a := range apps {
		out = append(out, a.ID)
	}
	sort.Strings(out)
	return out
}

// callerSees waits until the caller's Spring DiscoveryClient (what Spring
// Cloud LoadBalancer picks from) lists exactly want for service.
func callerSees(t *testing.T, caller *app, service string, want []string) {
	t.Helper()
	testwait.For(t, 60*time.Second, caller.App+" lists "+strings.Join(want, ", "), func() error {
		st, err := caller.state()
		if err != nil {
			return err
		}
		for k, v := range st.Services {
			if strings.EqualFold(k, service) {
				got := slices.Clone(v)
				sort.Strings(got)
				if slices.Equal(got, want) {
					return nil
				}
				return fmt.Errorf("it lists %v", got)
			}
		}
		return fmt.Errorf("no %s among %d services", service, len(st.Services))
	})
}

// calls is the steady stream of calls the test makes through the caller:
// each one is the caller calling the service by name.
type calls struct {
	caller  *app
	service string
	done    chan struct{}
	halt    sync.Once
	wg      sync.WaitGroup
	http    *http.Client

	// mu guards run.
	mu  sync.Mutex
	run restartRun
}

func startCalls(caller *app, service string) *calls {
	l := &calls{caller: caller, service: service, done: make(chan struct{}),
		http: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		run:  restartRun{answeredBy: map[string]int{}}}
	start := time.Now()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(drainCallEvery)
		defer tick.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-tick.C:
				// Each call on its own: a slow one must not delay the next,
				// or the rate would drop just when instances stop.
				l.wg.Add(1)
				go func() {
					defer l.wg.Done()
					l.one(time.Since(start))
				}()
			}
		}
	}()
	return l
}

func (l *calls) one(at time.Duration) {
	code, body := 0, ""
	resp, err := l.http.Get(l.caller.base() + "/control/lbcall?service=" + l.service)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body = resp.StatusCode, strings.TrimSpace(string(b))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run.calls++
	if err != nil || code != http.StatusOK {
		l.run.failed++
		if len(l.run.failures) < 10 {
			l.run.failures = append(l.run.failures, fmt.Sprintf("  at %5.1fs: %d %s %v", at.Seconds(), code, interoptest.Tail(body, 300), err))
		}
		return
	}
	l.run.answeredBy[body]++
}

func (l *calls) answered(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.run.answeredBy[id]
}

// stop ends the stream, waits for the calls in flight and returns the
// count; it may be called again.
func (l *calls) stop() restartRun {
	l.halt.Do(func() { close(l.done) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.run
}

// drainWithCLI is the recipe's preStop hook: the muster binary's drain
// against both nodes, waiting for the receipt, which must be complete
// (exit 0). It then checks that both nodes serve the instance
// OUT_OF_SERVICE, as the drain promises from the moment of the call.
func drainWithCLI(t *testing.T, nodes []*interoptest.Node, a *app) string {
	t.Helper()
	var urls []string
	for _, n := range nodes {
		// The instance's own write user, as the recipe's hook uses the
		// app's: a drain is a write of the app, no admin needed.
		urls = append(urls, strings.Replace(n.Base(), "://", "://"+a.ID+":"+drainAppPassword+"@", 1))
	}
	// The nodes and the credentials come from MUSTER_URL, as in the
	// recipe: a pod's environment, not the hook's command line.
	cmd := exec.Command(interoptest.Binary(t), "drain", "--wait", drainWait, a.App, a.ID)
	cmd.Env = append(os.Environ(), "MUSTER_URL="+strings.Join(urls, ","))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		t.Fatalf("preStop `muster drain --wait %s %s %s` exited %d after %s (3: readers still pending), want 0:\n%s",
			drainWait, a.App, a.ID, exit.ExitCode(), took.Round(time.Millisecond), out)
	case err != nil:
		t.Fatalf("muster drain: %v", err)
	}
	if strings.Contains(string(out), drainPassword) {
		t.Fatalf("muster drain printed the admin password:\n%s", out)
	}
	for _, n := range nodes {
		i, err := getInstance(n, adminURL(n)+"/eureka/", a.App, a.ID)
		if err != nil || i.Status != "OUT_OF_SERVICE" {
			t.Fatalf("after the drain the node on port %d serves %s/%s as %q (%v), want OUT_OF_SERVICE", n.Port, a.App, a.ID, i.Status, err)
		}
	}
	// The receipt as the node keeps it: complete, and not vacuously so
	// (the caller at least read the app before the drain).
	var receipt struct {
		Complete  bool `json:"complete"`
		Readers   int  `json:"readers"`
		Confirmed int  `json:"confirmed"`
	}
	code, b, err := nodeCall(nodes[0], http.MethodGet, adminURL(nodes[0])+"/admin/drain/"+a.App+"/"+a.ID)
	if err == nil && code == http.StatusOK {
		err = json.Unmarshal(b, &receipt)
	}
	if err != nil || code != http.StatusOK || !receipt.Complete || receipt.Readers < 1 || receipt.Confirmed != receipt.Readers {
		t.Fatalf("GET /admin/drain/%s/%s after exit 0: %d %v %s; want 200, complete, at least the caller among the readers, all confirmed", a.App, a.ID, code, err, b)
	}
	return fmt.Sprintf("%s: exit 0 after %s, readers confirmed: %d", a.ID, took.Round(time.Millisecond), receipt.Confirmed)
}
