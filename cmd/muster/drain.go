package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/muster-registry/muster/drain"
)

// Exit codes of muster drain: 0 complete, 3 the wait ended with readers
// pending (or the instance cancelled during it), 1 any error, an undrain
// by someone else during the wait included (run's default).
const exitDrainPending = 3

// exitCodeError is an error that ends the command with its own exit code
// after its message.
type exitCodeError struct {
	code int
	msg  string
}

func (e *exitCodeError) Error() string { return e.msg }

// drainCmd is muster drain [--undo] APP INSTANCE_ID: POST (or DELETE)
// /admin/drain/APP/INSTANCE_ID on the first node of --url that answers,
// then a one-line summary and the readers still pending. A Kubernetes
// preStop hook runs it with --wait, then lets the app stop.
func drainCmd(name string, args []string, stdout io.Writer, undo bool) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: muster %s [--url URL[,URL...]] [--wait DURATION] APP INSTANCE_ID\n\n", name)
		fmt.Fprintln(fs.Output(), "Exit 0 when every reader confirmed, 3 when the wait ended with readers pending or the instance cancelled during it, 1 on any error (an undrain during the wait included).")
		fs.PrintDefaults()
	}
	def := probeDefaults(os.Environ())
	defURL := strings.TrimSuffix(def.url, "/readyz")
	if env := os.Getenv("MUSTER_URL"); env != "" {
		defURL = env
	}
	rawURLs := fs.String("url", defURL, "the node, or a comma list of nodes tried in turn when one cannot be reached: base URLs or Eureka URLs, with user:pass@ when auth is on (default: $MUSTER_URL, else the local node)")
	wait := fs.Duration("wait", 0, "block until every reader confirmed or this long (e.g. 30s; at most the node's muster.drain.max-wait-ms)")
	timeout := fs.Duration("timeout", 0, "give up on a node after this long (default: --wait plus 10s)")
	fs.BoolVar(&undo, "undo", undo, "undrain: the instance is served with its own status again")
	jsonOut := fs.Bool("json", false, "print the receipt as the node sent it")
	clientTLS := clientTLSFlags(fs, def)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return fmt.Errorf("%s: want APP INSTANCE_ID, got %d arguments", name, fs.NArg())
	}
	app, id := fs.Arg(0), fs.Arg(1)
	if *wait < 0 {
		return fmt.Errorf("%s: --wait must not be negative", name)
	}
	if *timeout <= 0 {
		*timeout = *wait + 10*time.Second
	}
	tlsCfg, err := clientTLS()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	method := http.MethodPost
	if undo {
		method = http.MethodDelete
	}
	var lastErr error
	for _, raw := range strings.Split(*rawURLs, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := drainURL(raw, schemeOf(def.url), app, id, *wait, undo)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		code, body, err := callDrain(ctx, client, method, u)
		cancel()
		if err == nil && code >= 500 {
			err = fmt.Errorf("%s %s: %d: %.200s", method, u.Redacted(), code, strings.TrimSpace(string(body)))
		}
		if err != nil {
			// This node cannot be reached, or failed (a 5xx: stopping,
			// say): the next one can drain as well (every node serves the
			// drain cluster-wide). A 4xx is the request's fault: final.
			lastErr = err
			fmt.Fprintf(stdout, "%s: %v; trying the next node\n", name, err)
			continue
		}
		return reportDrain(stdout, name, u, code, body, *jsonOut, undo)
	}
	if lastErr == nil {
		return fmt.Errorf("%s: --url names no node", name)
	}
	return fmt.Errorf("%s: no node could drain (each unreachable or failing): %w", name, lastErr)
}

// drainURL is /admin/drain/APP/ID on the node raw names (host:port, a
// base URL, or a Eureka service URL; a context path is kept).
func drainURL(raw, defaultScheme, app, id string, wait time.Duration, undo bool) (*url.URL, error) {
	u, err := statusURL(raw, defaultScheme)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(u.Path, "/admin/status")
	u.Path = base + "/admin/drain/" + app + "/" + id
	u.RawPath = base + "/admin/drain/" + url.PathEscape(app) + "/" + url.PathEscape(id)
	if wait > 0 && !undo {
		u.RawQuery = "wait=" + url.QueryEscape(wait.String())
	}
	return u, nil
}

// callDrain sends the request; an error means the node could not be
// reached (or did not answer whole), never an HTTP status.
func callDrain(ctx context.Context, client *http.Client, method string, u *url.URL) (int, []byte, error) {
	target := *u
	target.User = nil
	req, err := http.NewRequestWithContext(ctx, method, target.String(), nil)
	if err != nil {
		return 0, nil, err
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
			err = uerr.Err // the url.Error repeats the URL, with its credentials
		}
		return 0, nil, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	return resp.StatusCode, body, nil
}

// reportDrain prints the node's answer and turns it into the exit code.
func reportDrain(stdout io.Writer, name string, u *url.URL, code int, body []byte, asJSON, undo bool) error {
	switch code {
	case http.StatusOK, http.StatusAccepted:
	case http.StatusConflict:
		// The drain ended during the wait; the body is its last receipt.
		var rc drain.Receipt
		if err := json.Unmarshal(body, &rc); err != nil || rc.Ended == "" {
			return fmt.Errorf("%s: %s: 409: %.300s", name, u.Redacted(), strings.TrimSpace(string(body)))
		}
		if asJSON {
			fmt.Fprintf(stdout, "%s\n", body)
		} else {
			fmt.Fprintf(stdout, "drain of %s/%s ended during the wait: the instance was %s (%d of %d readers had confirmed)\n",
				rc.App, rc.InstanceID, rc.Ended, rc.Confirmed, rc.Readers)
		}
		if rc.Ended == drain.EndedCancelled {
			// Gone from the registry: readers drop it on their next read,
			// which the drain could not wait for any more.
			return &exitCodeError{code: exitDrainPending}
		}
		return fmt.Errorf("%s: %s/%s was undrained by someone else during the wait: it is in service again", name, rc.App, rc.InstanceID)
	case http.StatusUnauthorized:
		return fmt.Errorf("%s: %s: 401: the node wants credentials it accepts: --url http://USER:PASSWORD@%s", name, u.Redacted(), u.Host)
	case http.StatusForbidden:
		return fmt.Errorf("%s: %s: 403: this user may not drain this instance (it needs the admin role, or the write role of the instance's app)", name, u.Redacted())
	default:
		return fmt.Errorf("%s: %s: %d: %.300s", name, u.Redacted(), code, strings.TrimSpace(string(body)))
	}
	var rc drain.Receipt
	if err := json.Unmarshal(body, &rc); err != nil {
		return fmt.Errorf("%s: %s did not answer with a drain receipt: %w", name, u.Redacted(), err)
	}
	if asJSON {
		fmt.Fprintf(stdout, "%s\n", body)
	} else {
		writeReceipt(stdout, rc, undo)
	}
	if !undo && !rc.Complete {
		return &exitCodeError{code: exitDrainPending}
	}
	return nil
}

func writeReceipt(w io.Writer, rc drain.Receipt, undo bool) {
	at := time.UnixMilli(rc.DrainedAt).UTC().Format(time.RFC3339)
	switch {
	case undo:
		fmt.Fprintf(w, "undrained %s/%s (drained since %s; %d of %d readers had confirmed)\n", rc.App, rc.InstanceID, at, rc.Confirmed, rc.Readers)
		return
	case rc.Complete:
		fmt.Fprintf(w, "drained %s/%s: complete, %d of %d readers confirmed on %d %s (drained at %s)\n",
			rc.App, rc.InstanceID, rc.Confirmed, rc.Readers, len(rc.Nodes), plural(len(rc.Nodes), "node", "nodes"), at)
	default:
		fmt.Fprintf(w, "drained %s/%s: NOT complete, %d of %d readers confirmed, %d pending (drained at %s)\n",
			rc.App, rc.InstanceID, rc.Confirmed, rc.Readers, len(rc.Pending), at)
	}
	for _, p := range rc.Pending {
		last := "-"
		if p.LastRead > 0 {
			last = time.UnixMilli(p.LastRead).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  pending: %s at %s via %s (last read %s)\n", p.Client, orDash(p.Address), p.Node, last)
	}
	if len(rc.Unseen) > 0 {
		fmt.Fprintf(w, "  not asked (no reader reports, e.g. Java Eureka peers): %s\n", strings.Join(rc.Unseen, ", "))
	}
	if rc.Untracked > 0 {
		fmt.Fprintf(w, "  %d reads were not tracked (reader tables full, muster.drain.max-readers)\n", rc.Untracked)
	}
}
