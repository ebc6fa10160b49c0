package ops

import (
	"context"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/muster-registry/muster/registry"
)

// LastNSize is how many registrations and how many cancels /lastn keeps:
// Eureka's dashboard's "Last 1000 since startup".
const LastNSize = 1000

// LastNSource is the change stream the recorder reads.
type LastNSource interface {
	Subscribe() *registry.Cursor
}

// LastNEntry is one registration or cancel as /lastn shows it. Evicted
// marks a cancel the node made itself because the lease expired: Eureka
// counts evictions as cancels (evict calls internalCancel, which adds to
// recentCanceledQueue), and so does /lastn, telling them apart.
type LastNEntry struct {
	App     string    `json:"app"`
	ID      string    `json:"id"`
	At      time.Time `json:"at"`
	Origin  string    `json:"origin"` // client, peer, sync, anti-entropy, node
	Evicted bool      `json:"evicted,omitempty"`
}

// lastNRing keeps the newest entries, overwriting the oldest.
type lastNRing struct {
	buf  []LastNEntry
	next int // where the next entry goes
	full bool
}

func (r *lastNRing) add(e LastNEntry) {
	r.buf[r.next] = e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// newestFirst copies the entries out, newest first.
func (r *lastNRing) newestFirst() []LastNEntry {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]LastNEntry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

// LastNRecorder keeps the last registrations and cancels since start, fed
// by the registry's change stream. Every register counts, whatever its
// origin (a client, a peer's replication, syncUp): Eureka's register adds
// to recentRegisteredQueue on each of them too.
type LastNRecorder struct {
	src LastNSource

	// mu guards registered, cancelled and missed.
	mu         sync.Mutex
	registered lastNRing
	cancelled  lastNRing
	missed     bool // the stream overflowed once: some changes are not listed
}

// NewLastNRecorder builds a recorder of size entries per kind (LastNSize
// when size <= 0). It reads nothing until Run.
func NewLastNRecorder(src LastNSource, size int) *LastNRecorder {
	if size <= 0 {
		size = LastNSize
	}
	return &LastNRecorder{
		src:        src,
		registered: lastNRing{buf: make([]LastNEntry, size)},
		cancelled:  lastNRing{buf: make([]LastNEntry, size)},
	}
}

// Run reads the change stream until ctx ends. Changes applied before Run
// subscribed are not listed.
func (l *LastNRecorder) Run(ctx context.Context) {
	cur := l.src.Subscribe()
	defer cur.Close()
	buf := make([]registry.Event, 0, 512)
	for {
		events, resync := cur.Read(buf)
		if resync {
			// History cannot be rebuilt from a snapshot; say so.
			l.mu.Lock()
			l.missed = true
			l.mu.Unlock()
			continue
		}
		if len(events) > 0 {
			l.Record(events)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-cur.Ready():
		}
	}
}

// Record adds the registrations and cancels among events (Run's work, and
// a test's way in).
func (l *LastNRecorder) Record(events []registry.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range events {
		ev := &events[i]
		e := LastNEntry{App: ev.Key.App, ID: ev.Key.ID, At: ev.At, Origin: ev.Origin.String()}
		switch ev.Kind {
		case registry.OpRegister:
			l.registered.add(e)
		case registry.OpEvict:
			e.Evicted = true
			fallthrough
		case registry.OpCancel:
			l.cancelled.add(e)
		}
	}
}

// LastNView is /lastn's JSON: both lists, newest first.
type LastNView struct {
	Size       int          `json:"size"`
	Registered []LastNEntry `json:"registered"`
	Cancelled  []LastNEntry `json:"cancelled"`
	// Incomplete is true when the recorder fell behind the change stream
	// once and some changes are missing.
	Incomplete bool `json:"incomplete,omitempty"`
}

// View copies the lists out.
func (l *LastNRecorder) View() LastNView {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LastNView{
		Size:       len(l.registered.buf),
		Registered: l.registered.newestFirst(),
		Cancelled:  l.cancelled.newestFirst(),
		Incomplete: l.missed,
	}
}

// LastNPath is the page's route.
const LastNPath = "/lastn"

// ServeLastN answers /lastn: JSON for Accept: application/json or
// ?format=json, else the HTML page.
func (l *LastNRecorder) ServeLastN(c echo.Context) error {
	view := l.View()
	r := c.Request()
	switch r.URL.Query().Get("format") {
	case "json":
		return c.JSON(http.StatusOK, view)
	case "", "html":
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "format must be json or html")
	}
	if accept := r.Header.Get("Accept"); strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html") {
		return c.JSON(http.StatusOK, view)
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusOK)
	return lastNPage.Execute(c.Response(), view)
}

var lastNPage = template.Must(template.New("lastn").Funcs(template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 MST") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Muster · last {{.Size}} since startup</title>
<link rel="stylesheet" href="/static/muster.css"></head>
<body><nav><a class="brand" href="/">Muster</a> <a href="/">dashboard</a> <a href="/console/instances">instances</a> <a href="/lastn?format=json">JSON</a></nav>
<main>
{{if .Incomplete}}<p class="bad">The list fell behind the registry's change stream once: some changes are missing.</p>{{end}}
<h2>Last {{.Size}} newly registered leases</h2>
<table><thead><tr><th>Timestamp</th><th>Lease</th><th>From</th></tr></thead><tbody>
{{range .Registered}}<tr><td>{{when .At}}</td><td>{{.App}}({{.ID}})</td><td>{{.Origin}}</td></tr>
{{else}}<tr><td colspan="3">none since startup</td></tr>{{end}}</tbody></table>
<h2>Last {{.Size}} cancelled leases</h2>
<table><thead><tr><th>Timestamp</th><th>Lease</th><th>From</th></tr></thead><tbody>
{{range .Cancelled}}<tr><td>{{when .At}}</td><td>{{.App}}({{.ID}})</td><td>{{if .Evicted}}evicted (lease expired){{else}}{{.Origin}}{{end}}</td></tr>
{{else}}<tr><td colspan="3">none since startup</td></tr>{{end}}</tbody></table>
</main></body></html>
`))
