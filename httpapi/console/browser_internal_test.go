//go:build linux

package console

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/muster-registry/muster/registry"
	"github.com/muster-registry/muster/registry/registrytest"
)

func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (Debian: apt-get install chromium; scripts/test.sh installs it when it can): skipping the browser test of the console")
	return ""
}

// cdp is a minimal DevTools protocol client for one page.
type cdp struct {
	t      *testing.T
	ws     *websocket.Conn
	mu     sync.Mutex // guards nextID and wait
	nextID int
	wait   map[int]chan cdpReply
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func startChromium(t *testing.T) *cdp {
	bin := findChromium(t)
	profile, err := os.MkdirTemp("", "muster-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*",
		"--user-data-dir="+profile, "--no-first-run", "--no-default-browser-check",
		// Loopback only: no background traffic, and no name resolves but
		// 127.0.0.1.
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-domain-reliability", "--disable-client-side-phishing-detection", "--disable-extensions",
		"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
		"--hide-scrollbars", "--window-size=1280,900", "about:blank")
	// Its own process group, so the cleanup ends Chromium's helpers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		t.Skipf("chromium did not start: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = os.RemoveAll(profile)
	})

	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`DevTools listening on (ws://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	var browserURL string
	select {
	case browserURL = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not print its DevTools address within 30 s")
	}
	if browserURL == "" {
		t.Fatal("chromium exited before it listened")
	}
	// The page target: /json/list on the same port.
	host := strings.SplitN(strings.TrimPrefix(browserURL, "ws://"), "/", 2)[0]
	var pageURL string
	for deadline := time.Now().Add(10 * time.Second); pageURL == "" && time.Now().Before(deadline); {
		resp, err := http.Get("http://" + host + "/json/list")
		if err == nil {
			var targets []struct{ Type, WebSocketDebuggerURL string }
			_ = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			for _, tg := range targets {
				if tg.Type == "page" {
					pageURL = tg.WebSocketDebuggerURL
					break
				}
			}
		}
		if pageURL == "" {
			time.Sleep(100 * time.Millisecond) // waiting for a process, not a timer under test
		}
	}
	if pageURL == "" {
		t.Fatal("no page target in chromium")
	}
	ws, err := websocket.Dial(pageURL, "", "http://127.0.0.1/")
	if err != nil {
		t.Fatal(err)
	}
	ws.MaxPayloadBytes = 64 << 20
	c := &cdp{t: t, ws: ws, wait: map[int]chan cdpReply{}}
	t.Cleanup(func() { ws.Close() })
	go c.read()
	c.call("Page.enable", nil)
	c.call("Runtime.enable", nil)
	c.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false})
	return c
}

func (c *cdp) read() {
	for {
		var msg struct {
			ID int `json:"id"`
			cdpReply
		}
		if err := websocket.JSON.Receive(c.ws, &msg); err != nil {
			c.mu.Lock()
			for id, ch := range c.wait {
				close(ch)
				delete(c.wait, id)
			}
			c.mu.Unlock()
			return
		}
		if msg.ID == 0 {
			continue // an event
		}
		c.mu.Lock()
		ch := c.wait[msg.ID]
		delete(c.wait, msg.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- msg.cdpReply
		}
	}
}

func (c *cdp) call(method string, params any) json.RawMessage {
	c.t.Helper()
	res, err := c.try(method, params)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	return res
}

// try is call that returns chromium's refusal instead of failing the test.
func (c *cdp) try(method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan cdpReply, 1)
	c.wait[id] = ch
	c.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	if err := websocket.JSON.Send(c.ws, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, errors.New("connection to chromium lost")
		}
		if r.Error != nil {
			return nil, errors.New(r.Error.Message)
		}
		return r.Result, nil
	case <-time.After(30 * time.Second):
		return nil, errors.New("no answer from chromium in 30 s")
	}
}

// eval runs expr in the page (awaiting a promise) and decodes its value
// into out.
func (c *cdp) eval(expr string, out any) {
	c.t.Helper()
	raw := c.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	c.decodeEval(expr, raw, out)
}

func (c *cdp) decodeEval(expr string, raw json.RawMessage, out any) {
	c.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatal(err)
	}
	if r.ExceptionDetails != nil {
		c.t.Fatalf("%s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			c.t.Fatalf("%s: %v (%s)", expr, err, r.Result.Value)
		}
	}
}

// waitFor polls a boolean expression until it holds: the page's scripts
// run on their own timers, so the test waits for the DOM, as a user would.
func (c *cdp) waitFor(what, expr string) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ok bool
		// A poll that meets a navigation (the page a click loads) is
		// refused with "Inspected target navigated or closed": the page
		// is changing, so poll again.
		raw, err := c.try("Runtime.evaluate", map[string]any{"expression": "!!(" + expr + ")", "returnByValue": true, "awaitPromise": true})
		switch {
		case err == nil:
			c.decodeEval(expr, raw, &ok)
		case !strings.Contains(err.Error(), "navigated or closed") && !strings.Contains(err.Error(), "context"):
			c.t.Fatalf("waiting for %s: Runtime.evaluate: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var html string
			c.eval("document.Body ? document.Body.innerText.slice(0, 2000) : ''", &html)
			c.t.Fatalf("waiting for %s (%s): not true after 20 s; page text:\n%s", what, expr, html)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cdp) navigate(url string) {
	c.t.Helper()
	c.call("Page.navigate", map[string]any{"url": url})
	c.waitFor("the page "+url, `document.readyState === "complete" && location.href.indexOf(`+jsString(url)+`) === 0`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// screenshot saves the page (or the element matching selector) as a PNG.
func (c *cdp) screenshot(dir, name, selector string) {
	c.t.Helper()
	params := map[string]any{"format": "png", "captureBeyondViewport": true}
	if selector != "" {
		var rect struct{ X, Y, W, H float64 }
		c.eval(`(() => { const r = document.querySelector(`+jsString(selector)+`).getBoundingClientRect();
			return {X: r.left + scrollX, Y: r.top + scrollY, W: r.width, H: r.height}; })()`, &rect)
		params["clip"] = map[string]any{"x": rect.X, "y": rect.Y, "width": rect.W, "height": rect.H, "scale": 1}
	}
	raw := c.call("Page.captureScreenshot", params)
	var r struct{ Data string }
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil || len(png) < 1000 {
		c.t.Fatalf("screenshot %s: %d bytes, %v", name, len(png), err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("screenshot %s (%d KB)", path, len(png)>>10)
}

func TestConsole_inChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test takes a few seconds")
	}
	findChromium(t)
	shots := t.TempDir()
	if os.Getenv("MUSTER_UPDATE_SCREENSHOTS") == "1" {
		shots = filepath.Join("..", "..", "docs")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	n := newTestNode(t)
	// 10,000 instances: 100 apps of 100, over three zones.
	fillConsole(t, n.reg, 100, 100)
	// An hour of history: 40 healthy minutes, then 22 apps (APP-13, APP-42,
	// APP-50…APP-69) stop renewing and APP-77 renews half as often: 15,500
	// renewals a minute against a threshold of 17,000, so self-preservation
	// holds expiry back until they come back ten minutes later.
	for step := range 360 {
		n.clock.Advance(10 * time.Second)
		if step%3 == 0 {
			for a := range 100 {
				app := fmt.Sprintf("APP-%02d", a)
				troubled := step >= 240 && step < 300
				if troubled && (a == 13 || a == 42 || a >= 50 && a < 70) || troubled && a == 77 && step%6 != 0 {
					continue
				}
				for i := range 100 {
					if _, err := n.reg.Apply(registry.RenewOp(app, fmt.Sprintf("%s-i%03d", strings.ToLower(app), i))); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		n.console.Sample()
	}

	b := startChromium(t)
	base := n.http.URL

	// The overview: 50 apps on the first page of 2, the chart drawn.
	b.navigate(base + "/")
	b.waitFor("the apps table", `document.querySelectorAll("#apps tr.app-row").length === 50`)
	var info struct {
		Pages, Renews, Threshold string
		Shaded                   int
		Episodes                 string
		Banner                   bool
	}
	b.eval(`({Pages: document.querySelector(".pager").textContent,
		Renews: document.querySelector("#chart-renews").getAttribute("d"),
		Threshold: document.querySelector("#chart-threshold").getAttribute("d"),
		Shaded: document.querySelectorAll("#sp-chart rect.sp-active").length,
		Episodes: document.querySelector("#sp-episodes").innerText,
		Banner: !!document.getElementById("open-banner")})`, &info)
	// An hour of samples: 360 points, but the renewals of the first
	// window (5 samples) are not known.
	if !strings.Contains(info.Pages, "page 1 of 2 (100)") || strings.Count(info.Renews, "M") != 1 || strings.Count(info.Renews, "L") != 354 ||
		strings.Count(info.Threshold, "L") != 359 || info.Shaded == 0 || !info.Banner {
		t.Errorf("overview in the browser: pages %q, renews path %d points, threshold path %d points, %d shaded periods, open banner %v",
			info.Pages, strings.Count(info.Renews, "L")+1, strings.Count(info.Threshold, "L")+1, info.Shaded, info.Banner)
	}
	for _, app := range []string{"APP-13", "APP-42"} {
		if !strings.Contains(info.Episodes, app) {
			t.Errorf("the self-preservation episode does not name %s: %q", app, info.Episodes)
		}
	}
	b.screenshot(shots, "console-overview.png", "")
	b.screenshot(shots, "console-self-preservation.png", "#sp-chart")

	// Search narrows the list as one types, without reloading.
	b.eval(`window.__sameDocument = true`, nil)
	b.eval(`document.getElementById("f-app").focus()`, nil)
	b.call("Input.insertText", map[string]any{"text": "app-4"})
	b.waitFor("the search to narrow the list", `document.querySelectorAll("#apps tr.app-row").length === 10`)
	var state struct {
		Same   bool
		Search string
		First  string
	}
	b.eval(`({Same: window.__sameDocument === true, Search: location.search,
		First: document.querySelector("#apps tr.app-row b").textContent})`, &state)
	if !state.Same || state.Search != "?app=app-4" || state.First != "APP-40" {
		t.Errorf("after typing app-4: %+v", state)
	}
	b.call("Input.insertText", map[string]any{"text": "2"})
	b.waitFor("the search to narrow to one app", `document.querySelectorAll("#apps tr.app-row").length === 1`)

	// The app page: 100 instances over two pages; the page updates itself
	// when an instance registers.
	b.navigate(base + "/console/apps/APP-42")
	b.waitFor("the instances", `document.querySelectorAll("#instances tr.instance-row").length === 50`)
	b.eval(`window.__sameDocument = true`, nil)
	if _, err := n.reg.Apply(registry.RegisterOp(registrytest.NewInstance("APP-42", "app-42-new"))); err != nil {
		t.Fatalf("register: %v", err)
	}
	b.waitFor("the live update", `document.querySelector(".pager").textContent.indexOf("(101)") >= 0 && window.__sameDocument === true`)

	// An action: out of service, through the confirmation page.
	// Clicks that navigate run after evaluate returns: a navigation during
	// Runtime.evaluate fails it ("Inspected target navigated or closed").
	b.eval(`setTimeout(() => document.querySelector('#instances tr[data-id="app-42-i005"] a.act[data-action="out-of-service"]').click(), 0)`, nil)
	b.waitFor("the confirmation page", `document.getElementById("confirm-button") !== null`)
	b.screenshot(shots, "console-confirm.png", "body")
	b.eval(`setTimeout(() => document.getElementById("confirm-button").click(), 0)`, nil)
	b.waitFor("the app page after the action", `document.getElementById("flash") !== null`)
	b.waitFor("the new status in the list", `document.querySelector('#instances tr[data-id="app-42-i005"] td.status').textContent === "OUT_OF_SERVICE"`)
	if st := statusOf(t, n, "APP-42", "app-42-i005"); st != registry.StatusOutOfService {
		t.Fatalf("APP-42/app-42-i005 after the action: %s", st)
	}
	// The filters of the app page: DOWN instances in zone b.
	b.navigate(base + "/console/apps/APP-42?status=DOWN&zone=b")
	b.waitFor("the filtered instances", `document.querySelectorAll("#instances tr.instance-row").length === 33`)
	b.navigate(base + "/console/apps/APP-42?size=12")
	b.waitFor("the app page", `document.querySelectorAll("#instances tr.instance-row").length === 12`)
	b.screenshot(shots, "console-app.png", "")

	// Nothing was loaded from anywhere but the node.
	var foreign []string
	b.eval(`performance.getEntriesByType("resource").map(e => e.name).filter(u => u.indexOf(`+jsString(base)+`) !== 0)`, &foreign)
	if len(foreign) > 0 {
		t.Errorf("the page loaded foreign resources: %v", foreign)
	}
}
