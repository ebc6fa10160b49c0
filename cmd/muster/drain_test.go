package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fetchAs reads the registry through n as a Java client with identity id.
func fetchAs(t *testing.T, addr, id string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/eureka/apps/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("DiscoveryIdentity-Name", "DefaultClient")
	req.Header.Set("DiscoveryIdentity-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("fetch: %d", resp.StatusCode)
	}
}

// TestDrain_exitCodesAndFailover runs muster drain against a real node,
// with a node that is down first in --url, as a preStop hook may meet.
func TestDrain_exitCodesAndFailover(t *testing.T) {
	n := startNode(t, "alpha")
	register(t, n, "ORDERS", "orders-1")
	fetchAs(t, n.Addr(), "10.9.0.1")
	down := "127.0.0.1:" + strconv.Itoa(freeTCPPort(t))
	urls := down + "," + n.Addr()

	drain := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	// Readers pending: exit 3, the reader named; the dead node skipped.
	code, out := drain("drain", "--url", urls, "--wait", "100ms", "ORDERS", "orders-1")
	if code != 3 || !strings.Contains(out, "trying the next node") || !strings.Contains(out, "NOT complete, 0 of 1 readers confirmed, 1 pending") ||
		!strings.Contains(out, "pending: DefaultClient (10.9.0.1) at 127.0.0.1 via alpha") {
		t.Fatalf("drain with a reader pending: exit %d:\n%s", code, out)
	}
	// The reader reads again: complete, exit 0.
	fetchAs(t, n.Addr(), "10.9.0.1")
	if code, out := drain("drain", "--url", urls, "--wait", "5s", "ORDERS", "orders-1"); code != 0 || !strings.Contains(out, "complete, 1 of 1 readers confirmed on 1 node") {
		t.Fatalf("drain with every reader confirmed: exit %d:\n%s", code, out)
	}
	// Errors: exit 1.
	for _, args := range [][]string{
		{"drain", "--url", down, "ORDERS", "orders-1"},                     // no node reachable
		{"drain", "--url", n.Addr(), "ORDERS", "nope"},                     // 404
		{"drain", "--url", n.Addr(), "--wait", "1h", "ORDERS", "orders-1"}, // 400: past the max wait
		{"drain", "--url", n.Addr(), "ORDERS"},                             // usage
	} {
		if code, out := drain(args...); code != 1 {
			t.Errorf("%v: exit %d, want 1:\n%s", args, code, out)
		}
	}
	// Undrain, both spellings; the second finds nothing drained (exit 1).
	if code, out := drain("undrain", "--url", n.Addr(), "ORDERS", "orders-1"); code != 0 || !strings.Contains(out, "undrained ORDERS/orders-1") {
		t.Fatalf("undrain: exit %d:\n%s", code, out)
	}
	if code, out := drain("drain", "--undo", "--url", n.Addr(), "ORDERS", "orders-1"); code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("undrain again: exit %d:\n%s", code, out)
	}
}

// A node that answers 5xx (one stopping, say) is skipped like one that
// cannot be reached; when none is left the last error is reported (exit 1).
func TestDrain_skipsANodeThatFails(t *testing.T) {
	n := startNode(t, "beta")
	register(t, n, "ORDERS", "orders-1")
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"drain", "--url", failing.URL + "," + n.Addr(), "ORDERS", "orders-1"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "503") || !strings.Contains(out.String(), "complete, 0 of 0 readers confirmed") {
		t.Fatalf("exit %d:\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"drain", "--url", failing.URL, "ORDERS", "orders-1"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no node could drain") {
		t.Fatalf("only a failing node: exit %d:\n%s%s", code, out.String(), errOut.String())
	}
}

// A drain whose instance cancels during the wait ends at once with its
// last receipt (409, exit 3: nobody can confirm any more); one undrained by
// someone else during the wait is an error (exit 1: it is in service
// again). Neither is a 5xx that would send the command to the next node.
func TestDrain_endsWhenTheDrainEndsUnderIt(t *testing.T) {
	n := startNode(t, "alpha")
	for _, tc := range []struct {
		id, end  string
		wantCode int
		wantOut  string
	}{
		{"orders-1", http.MethodDelete + " /eureka/apps/ORDERS/orders-1", 3, "ended during the wait: the instance was cancelled (0 of 1 readers had confirmed)"},
		{"orders-2", http.MethodDelete + " /admin/drain/ORDERS/orders-2", 1, "was undrained by someone else during the wait"},
	} {
		register(t, n, "ORDERS", tc.id)
		fetchAs(t, n.Addr(), "10.9.0.1") // a reader that never reads again
		type result struct {
			code int
			out  string
		}
		done := make(chan result, 1)
		go func() {
			var out bytes.Buffer
			code := run([]string{"drain", "--url", n.Addr(), "--wait", "2m", "ORDERS", tc.id}, &out, &out)
			done <- result{code, out.String()}
		}()
		// The drain is in force (the instance OUT_OF_SERVICE) before the
		// end comes, so the end lands during the wait.
		waitFor(t, 10*time.Second, "the drain in force", func() bool { return instanceStatus(t, n.Addr(), "ORDERS", tc.id) == "OUT_OF_SERVICE" })
		method, path, _ := strings.Cut(tc.end, " ")
		req, _ := http.NewRequest(method, "http://"+n.Addr()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", tc.end, resp.StatusCode)
		}
		r := <-done
		if r.code != tc.wantCode || !strings.Contains(r.out, tc.wantOut) || strings.Contains(r.out, "trying the next node") {
			t.Fatalf("%s during the wait: exit %d (want %d):\n%s", tc.end, r.code, tc.wantCode, r.out)
		}
	}
}

// instanceStatus is the status GET /eureka/apps/APP/ID shows on addr ("" if
// it cannot be read).
func instanceStatus(t *testing.T, addr, app, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/eureka/apps/"+app+"/"+id, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Instance struct {
			Status string `json:"status"`
		} `json:"instance"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return ""
	}
	return body.Instance.Status
}
