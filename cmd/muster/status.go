package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/muster-registry/muster/httpapi/ops"
	"github.com/muster-registry/muster/replication"
)

// statusCmd prints a node's state for a person at a terminal: identity,
// traffic, registry size, self-preservation and a one-line peer summary,
// all from GET /admin/status.
func statusCmd(args []string, stdout io.Writer) error {
	st, raw, asJSON, err := fetchStatus("status", args, stdout)
	if err != nil {
		return err
	}
	if asJSON {
		_, err := stdout.Write(raw)
		return err
	}
	writeStatus(stdout, st)
	return nil
}

// membersCmd prints the node and its peers as a table: zone, memberlist
// state, replication queue and last batch, last error.
func membersCmd(args []string, stdout io.Writer) error {
	st, raw, asJSON, err := fetchStatus("members", args, stdout)
	if err != nil {
		return err
	}
	if asJSON {
		_, err := stdout.Write(raw)
		return err
	}
	writeMembers(stdout, st)
	return nil
}

// fetchStatus parses the common flags and reads /admin/status. Credentials
// come from the URL (http://user:pass@host:8761), as in a Spring client's
// service URL; they go only to that host and never into messages.
func fetchStatus(name string, args []string, out io.Writer) (st ops.AdminStatus, raw []byte, asJSON bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	def := probeDefaults(os.Environ()) // in a node's container: its scheme, port and certificates
	rawURL := fs.String("url", strings.TrimSuffix(def.url, "/readyz"), "the node: its base URL or Eureka URL, with user:pass@ when auth is on")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	jsonOut := fs.Bool("json", false, "print /admin/status as the node sent it")
	clientTLS := clientTLSFlags(fs, def)
	if err = fs.Parse(args); err != nil {
		return st, nil, false, err
	}
	if fs.NArg() > 0 {
		return st, nil, false, fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	u, err := statusURL(*rawURL, schemeOf(def.url))
	if err != nil {
		return st, nil, false, fmt.Errorf("%s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	tlsCfg, err := clientTLS()
	if err != nil {
		return st, nil, false, fmt.Errorf("%s: %w", name, err)
	}
	raw, err = getAdminStatus(ctx, &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}, u)
	if err != nil {
		return st, nil, false, fmt.Errorf("%s: %w", name, err)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, nil, false, fmt.Errorf("%s: %s did not answer with a Muster status: %w", name, u.Redacted(), err)
	}
	return st, raw, *jsonOut, nil
}

// clientTLSFlags adds the TLS flags of the commands that call a node
// (--ca-cert, --cert, --key, defaulting to the node's own settings from
// the environment); the function returned builds the TLS config once fs
// is parsed.
func clientTLSFlags(fs *flag.FlagSet, def probe) func() (*tls.Config, error) {
	caFile := fs.String("ca-cert", def.ca, "PEM CA bundle to verify an https node against (default: server.ssl.trust-certificate from the environment)")
	certFile := fs.String("cert", def.cert, "PEM client certificate, for nodes with server.ssl.client-auth need (default: the node's own, from the environment)")
	keyFile := fs.String("key", def.key, "PEM key of --cert")
	return func() (*tls.Config, error) { return def.clientTLS(*caFile, *certFile, *keyFile) }
}

// statusURL turns what a user types (host:port, a base URL, or a Eureka
// service URL ending in /eureka/) into the /admin/status URL of that node.
func statusURL(raw, defaultScheme string) (*url.URL, error) {
	u, err := nodeURL(raw, defaultScheme, "/admin/status")
	if err != nil {
		return nil, err
	}
	// A node under a context path (server.servlet.context-path) serves
	// /admin/status under it: keep what comes before /eureka/.
	base := strings.TrimRight(u.Path, "/")
	for _, tail := range []string{"/admin/status", "/eureka/v2", "/eureka"} {
		base = strings.TrimSuffix(base, tail)
	}
	u.Path = base + "/admin/status"
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u, nil
}

func getAdminStatus(ctx context.Context, client *http.Client, u *url.URL) ([]byte, error) {
	target := *u
	target.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		pass, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pass)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the url.Error repeats the URL; ours is redacted below
		}
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusUnauthorized:
		if u.User == nil {
			return nil, fmt.Errorf("GET %s: 401: the node wants credentials: --url http://USER:PASSWORD@%s", u.Redacted(), u.Host)
		}
		return nil, fmt.Errorf("GET %s: 401: the node refused these credentials", u.Redacted())
	case http.StatusForbidden:
		return nil, fmt.Errorf("GET %s: 403: this user may not read /admin/status (it needs the admin role)", u.Redacted())
	}
	return nil, fmt.Errorf("GET %s: %d: %.200s", u.Redacted(), resp.StatusCode, strings.TrimSpace(string(body)))
}

// table lays out tab-separated rows in columns; flush writes them without
// the spaces tabwriter pads an empty last column with.
type table struct {
	out io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{out: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *table) flush() {
	t.tw.Flush()
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		if line != "" {
			fmt.Fprintln(t.out, strings.TrimRight(line, " \n"))
		}
	}
}

func writeStatus(w io.Writer, st ops.AdminStatus) {
	t := newTable(w)
	tw := t.tw
	row := func(label, format string, a ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{label}, a...)...)
	}
	row("Node", "%s (zone %s), version %s, up %s", st.Node, orDash(st.Zone), orDash(st.Version), humanDuration(time.Duration(st.UptimeSeconds)*time.Second))
	row("URL", "%s", orDash(st.URL))
	if st.OpenForTraffic {
		row("Traffic", "open: synced, serving clients")
	} else {
		row("Traffic", "NOT OPEN: still copying the registry from peers (syncUp)")
	}
	r := st.Registry
	row("Registry", "%d %s, %d %s (version %d, apps hashcode %s)", r.Apps, plural(r.Apps, "app", "apps"),
		r.Instances, plural(r.Instances, "instance", "instances"), r.Version, orDash(r.AppsHashcode))
	row("", "since start: %d registrations, %d renewals, %d cancels, %d evictions", r.Registrations, r.Renewals, r.Cancels, r.Evictions)
	sp := st.SelfPreservation
	switch {
	case !sp.Enabled:
		row("Self-preservation", "disabled: expired leases are always evicted")
	case sp.Active:
		row("Self-preservation", "ACTIVE: renewals are below the threshold, expired leases are kept")
	case sp.WarmingUp:
		row("Self-preservation", "warming up: no full renewal window measured yet, nothing is evicted")
	default:
		row("Self-preservation", "inactive: renewals are above the threshold, expired leases are evicted")
	}
	row("", "renewals last minute %d, threshold %d, expected %.0f/min, arriving %.0f/min",
		sp.RenewsLastMin, sp.RenewsThreshold, sp.ExpectedRenewsPerMin, sp.ArrivingRenewsPerMin)
	row("Peers", "%s", peerSummary(st.Peers))
	if len(st.Peers) > 0 {
		row("Anti-entropy", "%s", countInOrder(st.Peers, func(p ops.PeerInfo) string { text, _ := p.SyncLabel(); return text }))
	}
	t.flush()
}

// peerSummary counts peers by state: "3: 2 alive, 1 suspect".
func peerSummary(peers []ops.PeerInfo) string {
	if len(peers) == 0 {
		return "none (a single node)"
	}
	return fmt.Sprintf("%d: %s (muster members lists them)", len(peers), countInOrder(peers, func(p ops.PeerInfo) string { return p.State }))
}

// countInOrder counts peers by a word, in the order the words first come:
// "2 alive, 1 suspect".
func countInOrder(peers []ops.PeerInfo, word func(ops.PeerInfo) string) string {
	var order []string
	count := map[string]int{}
	for _, p := range peers {
		w := word(p)
		if count[w] == 0 {
			order = append(order, w)
		}
		count[w]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d %s", count[s], s)
	}
	return strings.Join(parts, ", ")
}

func writeMembers(w io.Writer, st ops.AdminStatus) {
	t := newTable(w)
	tw := t.tw
	fmt.Fprintln(tw, "NAME\tZONE\tSTATE\tQUEUE\tLAST BATCH\tIN SYNC\tURL\tLAST ERROR")
	self := "self"
	if !st.OpenForTraffic {
		self = "self (syncing)"
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\t\n", st.Node, orDash(st.Zone), self, orDash(st.URL))
	for _, p := range st.Peers {
		last := "-"
		if p.LastBatchMillis > 0 {
			last = fmt.Sprintf("%d ms", p.LastBatchMillis)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", p.Name, orDash(p.Zone), p.State, p.QueueDepth, last, syncColumn(p), orDash(p.URL), oneLine(peerError(p)))
	}
	t.flush()
}

// syncColumn is anti-entropy's verdict: yes when its last round with the
// peer found nothing different, no (and why when the round failed), pending
// before the first round, n/a for a Eureka peer or with anti-entropy off.
func syncColumn(p ops.PeerInfo) string {
	text, class := p.SyncLabel()
	switch {
	case class == "ok":
		return "yes"
	case class == "bad":
		return "no" + strings.TrimPrefix(text, "not in sync")
	}
	return text
}

// peerError is the last replication error, else the failing anti-entropy
// round's.
func peerError(p ops.PeerInfo) string {
	if p.LastError == "" && p.AntiEntropy == replication.AEFailing {
		return "anti-entropy: " + p.AntiEntropyError
	}
	return p.LastError
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// humanDuration prints an uptime as 3d4h, 2h05m, 4m10s or 12s.
func humanDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}
