package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Outcome of a client operation, as Jepsen says: ok (acknowledged), fail
// (certainly not applied: refused connection, 4xx, 503) or info (unknown:
// timeout, reset, other 5xx — it may have been applied, even later).
type Outcome int

const (
	OK Outcome = iota
	Fail
	Info
)

func (o Outcome) String() string { return [...]string{"ok", "fail", "info"}[o] }

// Op is one client operation of the history.
type Op struct {
	Seq    int
	Kind   string // register, heartbeat, cancel, override, unoverride, metadata
	By     string // fleet, writer, client (re-registration after a 404)
	App    string
	ID     string
	Node   int
	Value  string // metadata value sent (register, metadata)
	Invoke time.Duration
	Ack    time.Duration // when the answer (or the error) came
	Code   int
	Err    string
	Out    Outcome
}

func (o *Op) key() string { return o.App + "/" + o.ID }

func (o *Op) String() string {
	s := fmt.Sprintf("%8.3fs..%8.3fs %-10s %-6s n%d", o.Invoke.Seconds(), o.Ack.Seconds(), o.Kind, o.By, o.Node)
	if o.Value != "" {
		s += " k=" + o.Value
	}
	s += fmt.Sprintf(" → %s", o.Out)
	if o.Code != 0 {
		s += fmt.Sprintf(" %d", o.Code)
	}
	if o.Err != "" {
		s += " (" + o.Err + ")"
	}
	return s
}

// View is what a node served of one instance.
type View struct {
	Status     string
	Overridden string
	Meta       string // metadata k
}

func (v View) String() string {
	return fmt.Sprintf("%s/%s k=%s", v.Status, v.Overridden, v.Meta)
}

// Read is one successful GET /eureka/apps of one node: the checked apps'
// instances, by APP/id.
type Read struct {
	Node   int
	Invoke time.Duration
	Ack    time.Duration
	Insts  map[string]View
}

// Event is a fault or heal, for the report and the checks.
type Event struct {
	At    time.Duration
	Kind  string // fault, heal
	Fault *Fault
	What  string
}

type history struct {
	start       time.Time
	mu          sync.Mutex
	ops         []*Op
	reads       []*Read
	events      []Event
	failedReads map[int]int
}

func newHistory() *history {
	return &history{start: time.Now(), failedReads: map[int]int{}}
}

func (h *history) now() time.Duration { return time.Since(h.start) }

func (h *history) addOp(o *Op) {
	h.mu.Lock()
	o.Seq = len(h.ops)
	h.ops = append(h.ops, o)
	h.mu.Unlock()
}

func (h *history) addRead(r *Read) {
	h.mu.Lock()
	h.reads = append(h.reads, r)
	h.mu.Unlock()
}

func (h *history) event(kind string, f *Fault, what string) {
	h.mu.Lock()
	h.events = append(h.events, Event{At: h.now(), Kind: kind, Fault: f, What: what})
	h.mu.Unlock()
	fmt.Printf("  %7.2fs %s: %s\n", h.now().Seconds(), kind, what)
}

var httpc = &http.Client{
	Timeout: 2 * time.Second,
	Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	},
}

// do runs one operation and records it.
func (h *history) do(o *Op, method, url string, body []byte) *Op {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	o.Invoke = h.now()
	resp, err := httpc.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	o.Ack = h.now()
	switch {
	case err != nil:
		o.Err = shortErr(err)
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			o.Out = Fail
		} else {
			o.Out = Info
		}
	case resp.StatusCode/100 == 2:
		o.Code, o.Out = resp.StatusCode, OK
	case resp.StatusCode/100 == 4 || resp.StatusCode == 503:
		o.Code, o.Out = resp.StatusCode, Fail
	default:
		o.Code, o.Out = resp.StatusCode, Info
	}
	h.addOp(o)
	return o
}

func shortErr(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Op + ": " + oe.Err.Error()
	}
	if errors.Is(err, errTimeout) {
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return err.Error()
}

var errTimeout = errors.New("timeout")

// opsOf returns the operations on one instance, in invoke order.
func (h *history) opsOf(key string) []*Op {
	var out []*Op
	for _, o := range h.ops {
		if o.key() == key {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Invoke < out[b].Invoke })
	return out
}

// parseApps reads a GET /eureka/apps JSON body: the instances of the
// checked apps (names starting with CHK), by APP/id.
func parseApps(body []byte) (map[string]View, error) {
	var doc struct {
		Applications struct {
			Application json.RawMessage `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	out := map[string]View{}
	for _, raw := range list(doc.Applications.Application) {
		var app struct {
			Name     string          `json:"name"`
			Instance json.RawMessage `json:"instance"`
		}
		if err := json.Unmarshal(raw, &app); err != nil {
			return nil, err
		}
		if len(app.Name) < 3 || app.Name[:3] != "CHK" {
			continue
		}
		for _, ri := range list(app.Instance) {
			id, v, err := parseInstance(ri)
			if err != nil {
				return nil, err
			}
			out[app.Name+"/"+id] = v
		}
	}
	return out, nil
}

func parseInstance(raw []byte) (string, View, error) {
	var in struct {
		InstanceID  string            `json:"instanceId"`
		Status      string            `json:"status"`
		Overridden  string            `json:"overriddenStatus"`
		Overridden2 string            `json:"overriddenstatus"`
		Metadata    map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return "", View{}, err
	}
	ov := in.Overridden
	if ov == "" {
		ov = in.Overridden2
	}
	if ov == "" {
		ov = "UNKNOWN"
	}
	return in.InstanceID, View{Status: in.Status, Overridden: ov, Meta: in.Metadata["k"]}, nil
}

// list reads a JSON array, or a single object as a list of one (Eureka's
// JSON may collapse one-element lists).
func list(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '{' {
		return []json.RawMessage{raw}
	}
	var out []json.RawMessage
	_ = json.Unmarshal(raw, &out)
	return out
}
