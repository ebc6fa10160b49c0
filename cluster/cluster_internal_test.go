package cluster

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/muster-registry/muster/internal/testlog"
	"github.com/rs/zerolog"
)

// newTestCluster is an unstarted Cluster named "self" logging to buf.
func newTestCluster(t *testing.T, buf *testlog.Buffer) *Cluster {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeName = "self"
	cfg.EurekaURL = "http://self:8761/eureka/"
	cfg.Memberlist = memberlist.DefaultLocalConfig()
	cfg.Memberlist.GossipToTheDeadTime = 15 * time.Second
	cfg.Logger = zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), buf))
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func node(name string, state memberlist.NodeStateType, meta string) *memberlist.Node {
	return &memberlist.Node{Name: name, Addr: net.IPv4(10, 0, 0, 9), Port: 7946, Meta: []byte(meta), State: state}
}

func TestJoinBackoff(t *testing.T) {
	base, max := time.Second, 15*time.Second
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, 1 * time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{4, 8 * time.Second},
		{5, 15 * time.Second},
		{100, 15 * time.Second},
	}
	for _, tt := range tests {
		if got := joinBackoff(base, max, tt.failures); got != tt.want {
			t.Errorf("joinBackoff(1s, 15s, %d) = %s, want %s", tt.failures, got, tt.want)
		}
	}
	if got := joinBackoff(time.Hour, 1<<62, 200); got != 1<<62 {
		t.Errorf("joinBackoff near overflow = %d, want the cap", got)
	}
}

func TestWarnLimiter_Allow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := warnLimiter{every: time.Minute}
	steps := []struct {
		at             time.Duration
		msg            string
		want           bool
		wantSuppressed int
	}{
		{0, "refused", true, 0},
		{time.Second, "refused", false, 0},
		{3 * time.Second, "refused", false, 0},
		{7 * time.Second, "timeout", true, 2}, // a new error is always worth a Warn
		{22 * time.Second, "timeout", false, 0},
		{67 * time.Second, "timeout", true, 1}, // a minute after the last Warn
	}
	for i, s := range steps {
		got, suppressed := w.allow(s.msg, t0.Add(s.at))
		if got != s.want || suppressed != s.wantSuppressed {
			t.Errorf("step %d: allow(%q, t0+%s) = %v, %d; want %v, %d", i, s.msg, s.at, got, suppressed, s.want, s.wantSuppressed)
		}
	}
}

func TestParseMemberlistLine(t *testing.T) {
	tests := []struct {
		line  string
		level zerolog.Level
		msg   string
	}{
		{"[ERR] memberlist: Decrypt packet failed: x\n", zerolog.ErrorLevel, "Decrypt packet failed: x"},
		{"[ERROR] memberlist: Failed to compress payload: x\n", zerolog.ErrorLevel, "Failed to compress payload: x"},
		{"[WARN] memberlist: Refuting a suspect message (from: b)\n", zerolog.WarnLevel, "Refuting a suspect message (from: b)"},
		{"[INFO] memberlist: Suspect c has failed, no acks received\n", zerolog.InfoLevel, "Suspect c has failed, no acks received"},
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n", zerolog.DebugLevel, "Stream connection from=127.0.0.1:1"},
		{"Err: Could not set the deadline: x\n", zerolog.ErrorLevel, "Could not set the deadline: x"},
		{"no prefix\n", zerolog.InfoLevel, "no prefix"},
	}
	for _, tt := range tests {
		level, msg := parseMemberlistLine(tt.line)
		if level != tt.level || msg != tt.msg {
			t.Errorf("parseMemberlistLine(%q) = %s, %q; want %s, %q", tt.line, level, msg, tt.level, tt.msg)
		}
	}
}

func TestMemberlistWriter_Write_keyMismatchHint(t *testing.T) {
	var buf testlog.Buffer
	w := &memberlistWriter{log: zerolog.New(&buf), gate: &logGate{}}
	_, _ = w.Write([]byte("[ERR] memberlist: failed to receive: No installed keys could decrypt the message from=127.0.0.1:1\n"))
	_, _ = w.Write([]byte("[DEBUG] memberlist: Stream connection\n"))
	_, _ = w.Write([]byte("[DEBUG] memberlist: failed to join 127.0.0.1:1: remote state is encrypted and encryption is not configured\n"))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(lines), out)
	}
	// The join loop reports join failures at Warn (rate-limited), so
	// memberlist's own debug line about one only gains the hint.
	if !strings.Contains(lines[2], `"level":"debug"`) || !strings.Contains(lines[2], secretKeyHint) {
		t.Errorf("join failure logged as %s, want debug level with %q", lines[2], secretKeyHint)
	}
	if !strings.Contains(lines[0], `"level":"error"`) || !strings.Contains(lines[0], secretKeyHint) {
		t.Errorf("decrypt failure logged as %s, want error level with %q", lines[0], secretKeyHint)
	}
	if !strings.Contains(lines[1], `"level":"debug"`) || !strings.Contains(lines[1], `"source":"memberlist"`) {
		t.Errorf("debug line logged as %s", lines[1])
	}

	w.gate.close()
	_, _ = w.Write([]byte("[ERR] memberlist: late\n"))
	if strings.Contains(buf.String(), "late") {
		t.Errorf("logged after the gate closed:\n%s", buf.String())
	}
}

func TestJoinError_Error(t *testing.T) {
	multi := errors.New("2 errors occurred:\n\t* failed to join 10.0.0.1:7946: EOF\n\t* failed to join 10.0.0.2:7946: No installed keys could decrypt the message\n\n")
	err := &joinError{seeds: []string{"10.0.0.1:7946", "10.0.0.2:7946"}, err: multi}
	want := "cluster: join 10.0.0.1:7946,10.0.0.2:7946: failed to join 10.0.0.1:7946: EOF; " +
		"failed to join 10.0.0.2:7946: No installed keys could decrypt the message (is cluster.secret-key the same on every node?)"
	if err.Error() != want {
		t.Errorf("Error() =\n%q\nwant\n%q", err.Error(), want)
	}
	if !errors.Is(err, multi) {
		t.Errorf("errors.Is(joinError, cause) = false")
	}
	refused := &joinError{seeds: []string{"a:1"}, err: errors.New("1 error occurred:\n\t* failed to join 127.0.0.1:1: dial tcp 127.0.0.1:1: connect: connection refused\n\n")}
	if strings.Contains(refused.Error(), secretKeyHint) {
		t.Errorf("connection refused got the secret-key hint: %q", refused.Error())
	}
}

func TestNodeMeta_roundTrip(t *testing.T) {
	b, err := encodeMeta(nodeMeta{Zone: "us-east-1a", URL: "http://10.0.0.5:8761/eureka/"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"zone":"us-east-1a","url":"http://10.0.0.5:8761/eureka/"}`; string(b) != want {
		t.Errorf("encodeMeta = %s, want %s", b, want)
	}
	m, err := decodeMeta(b)
	if err != nil || m.Zone != "us-east-1a" || m.URL != "http://10.0.0.5:8761/eureka/" || m.Leaving {
		t.Errorf("decodeMeta = %+v, %v", m, err)
	}
	if _, err := decodeMeta([]byte(`{"zone":"z","url":"u","future":1}`)); err != nil {
		t.Errorf("decodeMeta with an unknown key = %v, want nil", err)
	}
	for _, bad := range []string{"", "garbage", `{"url":5}`} {
		if _, err := decodeMeta([]byte(bad)); err == nil {
			t.Errorf("decodeMeta(%q) = nil error", bad)
		}
	}
}

func TestDelegate_NodeMeta(t *testing.T) {
	d, err := newDelegate(nodeMeta{Zone: "z", URL: "http://n/eureka/"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(d.NodeMeta(memberlist.MetaMaxSize)), `{"zone":"z","url":"http://n/eureka/"}`; got != want {
		t.Errorf("NodeMeta = %s, want %s", got, want)
	}
	if got := d.NodeMeta(10); got != nil {
		t.Errorf("NodeMeta over limit = %s, want nil", got)
	}
	d.setLeaving()
	if got, want := string(d.NodeMeta(memberlist.MetaMaxSize)), `{"zone":"z","url":"http://n/eureka/","leaving":true}`; got != want {
		t.Errorf("NodeMeta after setLeaving = %s, want %s", got, want)
	}
}

func TestEventDelegate_NotifyJoin_unparsableMeta(t *testing.T) {
	var buf testlog.Buffer
	c := newTestCluster(t, &buf)
	ev := &eventDelegate{c: c}
	ev.NotifyJoin(node("peer", memberlist.StateAlive, "garbage"))
	ev.NotifyUpdate(node("peer", memberlist.StateAlive, "still garbage"))

	got, ok := c.member("peer")
	want := Member{Name: "peer", Addr: "10.0.0.9", Port: 7946, State: StateAlive}
	if !ok || got != want {
		t.Fatalf("member(peer) = %+v, %v; want %+v", got, ok, want)
	}
	if n := strings.Count(buf.String(), "unparsable node metadata"); n != 1 {
		t.Errorf("logged the metadata warning %d times, want once:\n%s", n, buf.String())
	}

	ev.NotifyUpdate(node("peer", memberlist.StateAlive, `{"zone":"z","url":"http://peer/eureka/"}`))
	if got, _ := c.member("peer"); got.EurekaURL != "http://peer/eureka/" || got.Zone != "z" {
		t.Errorf("after valid metadata: %+v", got)
	}
}

func TestEventDelegate_NotifyLeave_deadOrLeft(t *testing.T) {
	var buf testlog.Buffer
	c := newTestCluster(t, &buf)
	ev := &eventDelegate{c: c}
	meta := `{"zone":"z1","url":"http://p/eureka/"}`
	leaving := `{"zone":"z1","url":"http://p/eureka/","leaving":true}`
	ev.NotifyJoin(node("self", memberlist.StateAlive, meta))
	ev.NotifyJoin(node("p1", memberlist.StateAlive, meta))
	ev.NotifyJoin(node("p2", memberlist.StateAlive, meta))
	// memberlist passes StateAlive whatever the real state
	// (hashicorp/memberlist#293); the leave intent in the metadata decides.
	ev.NotifyUpdate(node("p1", memberlist.StateAlive, leaving))
	ev.NotifyLeave(node("p1", memberlist.StateAlive, leaving))
	ev.NotifyLeave(node("p2", memberlist.StateAlive, meta))

	got := c.Members()
	wantStates := map[string]State{"p1": StateLeft, "p2": StateDead, "self": StateAlive}
	if len(got) != 3 {
		t.Fatalf("Members() = %+v, want 3", got)
	}
	for _, m := range got {
		if m.State != wantStates[m.Name] || m.Self != (m.Name == "self") {
			t.Errorf("member %+v, want state %s", m, wantStates[m.Name])
		}
	}
	for _, want := range []string{`"message":"peer left"`, `"message":"peer dead"`, `"peer":"p1"`, `"zone":"z1"`,
		`"url":"http://p/eureka/"`, `"component":"cluster"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, buf.String())
		}
	}
}

func TestCluster_Changes_coalesces(t *testing.T) {
	var buf testlog.Buffer
	c := newTestCluster(t, &buf)
	ev := &eventDelegate{c: c}
	ev.NotifyJoin(node("p1", memberlist.StateAlive, "{}"))
	ev.NotifyJoin(node("p2", memberlist.StateAlive, "{}")) // must not block on the full channel
	<-c.Changes()
	select {
	case <-c.Changes():
		t.Fatal("second notification pending, want them coalesced into one")
	default:
	}
	ev.NotifyUpdate(node("p2", memberlist.StateAlive, "{}")) // nothing changed
	select {
	case <-c.Changes():
		t.Fatal("notified without a change")
	default:
	}
}

func TestCluster_ReconcileLocked(t *testing.T) {
	var buf testlog.Buffer
	c := newTestCluster(t, &buf) // DefaultLocalConfig: probe 1 s, suspicion mult 3, max mult 6
	ev := &eventDelegate{c: c}
	t0 := time.Unix(1000, 0)
	for _, n := range []string{"self", "p1", "p2", "p3"} {
		ev.NotifyJoin(node(n, memberlist.StateAlive, "{}"))
	}
	c.observe(node("p3", memberlist.StateAlive, "{}"), StateDead, t0)
	c.suspect("p1", t0) // suspicion ends by t0 + 6 × 3 × 1 s + 1 s = t0+19s
	c.suspect("p2", t0)
	c.unsuspect("p2")     // p2 acked a probe
	c.suspect("p3", t0)   // dead stays dead
	c.suspect("self", t0) // memberlist never suspects itself

	steps := []struct {
		name        string
		at          time.Duration
		want        map[string]State // absent: forgotten
		wantChanges int
	}{
		{"before any deadline", time.Second,
			map[string]State{"self": StateAlive, "p1": StateSuspect, "p2": StateAlive, "p3": StateDead}, 0},
		{"p3 forgotten after GossipToTheDeadTime", 15 * time.Second,
			map[string]State{"self": StateAlive, "p1": StateSuspect, "p2": StateAlive}, 1},
		{"p1 still suspect", 18 * time.Second,
			map[string]State{"self": StateAlive, "p1": StateSuspect, "p2": StateAlive}, 0},
		{"p1's suspicion must have been refuted", 19 * time.Second,
			map[string]State{"self": StateAlive, "p1": StateAlive, "p2": StateAlive}, 1},
	}
	for _, s := range steps {
		c.mu.Lock()
		changes := c.reconcileLocked(t0.Add(s.at))
		c.mu.Unlock()
		if len(changes) != s.wantChanges {
			t.Errorf("%s: %d changes %+v, want %d", s.name, len(changes), changes, s.wantChanges)
		}
		got := map[string]State{}
		for _, m := range c.Members() {
			got[m.Name] = m.State
		}
		if len(got) != len(s.want) {
			t.Errorf("%s: members %v, want %v", s.name, got, s.want)
		}
		for name, want := range s.want {
			if got[name] != want {
				t.Errorf("%s: %s is %q, want %q", s.name, name, got[name], want)
			}
		}
	}
}

func TestMemberlistWriter_Write_suspect(t *testing.T) {
	var buf testlog.Buffer
	c := newTestCluster(t, &buf)
	(&eventDelegate{c: c}).NotifyJoin(node("peer 1", memberlist.StateAlive, `{"zone":"z","url":"http://p/eureka/"}`))
	<-c.Changes()
	w := &memberlistWriter{log: c.log, gate: &c.gate, onSuspect: func(name string) { c.suspect(name, time.Now()) }}
	_, _ = w.Write([]byte("[INFO] memberlist: Suspect peer 1 has failed, no acks received\n"))
	if got, _ := c.member("peer 1"); got.State != StateSuspect {
		t.Fatalf("after memberlist's suspect line: %+v, want suspect", got)
	}
	select {
	case <-c.Changes():
	default:
		t.Errorf("no Changes() notification for suspect")
	}
	(&pingDelegate{c: c}).NotifyPingComplete(node("peer 1", memberlist.StateAlive, ""), time.Millisecond, nil)
	if got, _ := c.member("peer 1"); got.State != StateAlive {
		t.Errorf("after an ack: %+v, want alive", got)
	}
	for _, want := range []string{`"message":"peer suspect"`, `"message":"peer alive again"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, buf.String())
		}
	}
}

func TestSuspectedNode(t *testing.T) {
	tests := []struct {
		msg    string
		name   string
		wantOK bool
	}{
		{"Suspect node-1 has failed, no acks received", "node-1", true},
		{"Suspect a b has failed, no acks received", "a b", true},
		{"Suspect  has failed, no acks received", "", false},
		{"Marking node-1 as failed, suspect timeout reached (1 peer confirmations)", "", false},
		{"Refuting a suspect message (from: b)", "", false},
	}
	for _, tt := range tests {
		name, ok := suspectedNode(tt.msg)
		if name != tt.name || ok != tt.wantOK {
			t.Errorf("suspectedNode(%q) = %q, %v; want %q, %v", tt.msg, name, ok, tt.name, tt.wantOK)
		}
	}
}

func TestMaxSuspicion(t *testing.T) {
	lan := memberlist.DefaultLANConfig() // probe 1 s, mult 4, max mult 6
	tests := []struct {
		n    int
		want time.Duration
	}{
		{1, 6*4*time.Second + time.Second},
		{3, 6*4*time.Second + time.Second},   // log10(3) < 1: scale 1
		{100, 6*8*time.Second + time.Second}, // log10(100) = 2
	}
	for _, tt := range tests {
		if got := maxSuspicion(lan, tt.n); got != tt.want {
			t.Errorf("maxSuspicion(LAN, %d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func TestCluster_Shutdown_beforeStart(t *testing.T) {
	var buf testlog.Buffer
	c := newTestCluster(t, &buf)
	if err := c.Shutdown(time.Second); err != nil {
		t.Fatalf("Shutdown before Start = %v", err)
	}
	// Late memberlist callbacks after Shutdown change nothing and log nothing.
	(&eventDelegate{c: c}).NotifyJoin(node("late", memberlist.StateAlive, "{}"))
	if got := c.Members(); len(got) != 0 {
		t.Errorf("Members() = %+v after Shutdown, want empty", got)
	}
	if strings.Contains(buf.String(), "late") {
		t.Errorf("logged after Shutdown:\n%s", buf.String())
	}
}
