package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// watchApp is the app whose watch stream is checked: the writer's.
const watchApp = "CHKW"

// watcher follows one node's GET /eureka/watch?app=CHKW, resuming after
// the last id on every reconnect, and keeps the app's state as the stream
// tells it (a resync re-reads GET /eureka/apps/CHKW).
type watcher struct {
	r *run
	n int

	mu     sync.Mutex
	state  map[string]View
	lastID uint64
	haveID bool
	// shown is the index of the last GET the state was read from: after a
	// resync the stream goes on from the resync's id, and the events up
	// to shown may already be in that read (docs/clients.md).
	shown      uint64
	events     int
	reconnects int
	resyncs    int
	violations []string
}

func (w *watcher) violate(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) < 20 {
		w.violations = append(w.violations, fmt.Sprintf("%7.2fs n%d: ", w.r.h.now().Seconds(), w.n)+fmt.Sprintf(format, a...))
	}
}

// snapshot reads GET /eureka/apps/CHKW: the app's state and its index.
func (w *watcher) snapshot(ctx context.Context) (map[string]View, uint64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/eureka/apps/%s", w.r.nodes[w.n].url(), watchApp), nil)
	req.Header.Set("Accept", "application/json")
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	idx, err := strconv.ParseUint(resp.Header.Get("X-Muster-Index"), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("X-Muster-Index %q", resp.Header.Get("X-Muster-Index"))
	}
	state := map[string]View{}
	switch resp.StatusCode {
	case 404:
	case 200:
		// {"application":{"name":…,"instance":[…]}}
		m, err := parseApps([]byte(`{"applications":` + string(body) + `}`))
		if err != nil {
			return nil, 0, err
		}
		state = m
	default:
		return nil, 0, fmt.Errorf("GET apps/%s: %d", watchApp, resp.StatusCode)
	}
	return state, idx, nil
}

func (w *watcher) loop(ctx context.Context) {
	for ctx.Err() == nil {
		if !w.r.nodes[w.n].running() {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		w.mu.Lock()
		have := w.haveID
		w.mu.Unlock()
		if !have {
			st, idx, err := w.snapshot(ctx)
			if err != nil {
				sleepCtx(ctx, 300*time.Millisecond)
				continue
			}
			w.mu.Lock()
			w.state, w.lastID, w.shown, w.haveID = st, idx, idx, true
			w.mu.Unlock()
		}
		_ = w.stream(ctx) // any end: reconnect and resume
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.reconnects++
		w.mu.Unlock()
		sleepCtx(ctx, 300*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// stream reads one connection of the watch stream until it ends.
func (w *watcher) stream(ctx context.Context) error {
	w.mu.Lock()
	from := w.lastID
	w.mu.Unlock()
	// The watcher itself drops the connection every 2–8 s, so resuming
	// after an id is exercised on a node that stays up too.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(2000+rand.Intn(6000))*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("%s/eureka/watch?app=%s&index=%d", w.r.nodes[w.n].url(), watchApp, from), nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("watch: %d", resp.StatusCode)
	}
	// A paused node's stream stalls; the comment every 15 s and the
	// node's return end the stall. Closing the body on ctx ends the read.
	go func() {
		<-ctx.Done()
		resp.Body.Close()
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var id, ev string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev != "" {
				w.dispatch(ctx, id, ev, data.String(), from)
			}
			id, ev = "", ""
			data.Reset()
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "event:"):
			ev = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimSpace(line[5:]))
		}
	}
	return sc.Err()
}

func (w *watcher) dispatch(ctx context.Context, idStr, ev, data string, from uint64) {
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil && ev != "open" {
		w.violate("event %s with an id that is no number: %q", ev, idStr)
		return
	}
	switch ev {
	case "open":
		return
	case "resync":
		st, idx, err := w.snapshot(ctx)
		w.mu.Lock()
		w.resyncs++
		if err == nil {
			// Ids go on from the resync's (the stream's position), which
			// the read may be past.
			w.state, w.lastID, w.shown = st, id, idx
		} else {
			w.haveID = false // read again on the next connection
		}
		w.mu.Unlock()
		return
	}
	w.mu.Lock()
	last := w.lastID
	w.mu.Unlock()
	if id <= last {
		w.violate("event %s id %d not after the last id %d (resumed from %d): out of order or repeated", ev, id, last, from)
	}
	key, v, derr := eventInstance(data)
	if derr != nil {
		w.violate("event %s id %d: bad data %q: %v", ev, id, data, derr)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if id > w.lastID {
		w.lastID = id
	}
	if id <= w.shown {
		return // the state was read at or after it
	}
	switch ev {
	case "DELETED":
		delete(w.state, key)
	case "ADDED", "MODIFIED":
		w.state[key] = v
	}
}

func eventInstance(data string) (string, View, error) {
	var head struct {
		App        string `json:"app"`
		InstanceID string `json:"instanceId"`
	}
	if err := jsonUnmarshal([]byte(data), &head); err != nil {
		return "", View{}, err
	}
	_, v, err := parseInstance([]byte(data))
	return strings.ToUpper(head.App) + "/" + head.InstanceID, v, err
}
