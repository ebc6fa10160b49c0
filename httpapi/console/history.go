package console

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/muster-registry/muster/registry"
)

// The console keeps an hour of self-preservation figures, one sample every
// historyInterval, in a ring: 360 samples of a few words each.
const (
	historyInterval = 10 * time.Second
	historySpan     = time.Hour
	historySamples  = int(historySpan / historyInterval)
	// perAppSpan is how far back per-app renewal totals are kept: enough to
	// compare the minute before a drop with the minute after it, given
	// that the registry notices a drop only when a whole window of low
	// renewals has completed (one to two windows after it began).
	perAppSpan = 3*time.Minute + historyInterval
	// maxEpisodes is how many periods of self-preservation are remembered.
	maxEpisodes = 10
	// maxDrops is how many apps an episode names.
	maxDrops = 8
)

// spSample is one point of the self-preservation chart.
type spSample struct {
	At        time.Time
	Renews    int64 // renewals of the last complete window, per minute
	Threshold int64
	Expected  float64
	Warming   bool // the first renewal window since opening: Renews is not known yet
	Below     bool // renewals below the threshold
	Active    bool // Below and self-preservation enabled: expiry held back
}

// spEpisode is one period with renewals below the threshold.
type spEpisode struct {
	Start, End time.Time // End is zero while it lasts
	Active     bool      // self-preservation held expiry back
	Drops      []appDrop // the apps whose renewals fell most, largest first

	baseline map[string]int64 // per-app renewals a minute before; nil once Drops is final
}

// appDrop is an app's renewals per minute before and after a drop.
type appDrop struct {
	App           string
	Before, After int64
}

type appTotals struct {
	at     time.Time
	totals map[string]uint64
}

// spHistory records the samples. sample runs every historyInterval (Run);
// tests call it on a moved clock.
type spHistory struct {
	seq atomic.Uint64 // bumped by every sample; part of the console's live index

	// mu guards samples, next, perApp and episodes.
	mu       sync.Mutex
	samples  []spSample // ring of historySamples
	next     int
	perApp   []appTotals // ring covering perAppSpan
	episodes []spEpisode // oldest first, at most maxEpisodes
}

func newSPHistory() *spHistory {
	return &spHistory{
		samples: make([]spSample, 0, historySamples),
		perApp:  make([]appTotals, 0, int(perAppSpan/historyInterval)+1),
	}
}

func (h *spHistory) sample(now time.Time, sp registry.SelfPreservation, reg Registry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	smp := spSample{At: now, Renews: sp.RenewsLastMin, Threshold: sp.RenewsThreshold,
		Expected: sp.ExpectedRenewsPerMin, Warming: sp.WarmingUp, Below: sp.Below, Active: sp.Active}
	if len(h.samples) < historySamples {
		h.samples = append(h.samples, smp)
	} else {
		h.samples[h.next] = smp
		h.next = (h.next + 1) % historySamples
	}

	// Per-app totals: reuse the map of the sample that falls out.
	var reuse map[string]uint64
	cutoff := now.Add(-perAppSpan)
	for len(h.perApp) > 0 && !h.perApp[0].at.After(cutoff) || len(h.perApp) == cap(h.perApp) {
		reuse = h.perApp[0].totals
		h.perApp = append(h.perApp[:0], h.perApp[1:]...)
	}
	h.perApp = append(h.perApp, appTotals{at: now, totals: reg.AppRenewals(reuse)})

	var last *spEpisode
	if n := len(h.episodes); n > 0 && h.episodes[n-1].End.IsZero() {
		last = &h.episodes[n-1]
	}
	switch {
	case sp.Below && last == nil:
		if len(h.episodes) == maxEpisodes {
			h.episodes = append(h.episodes[:0], h.episodes[1:]...)
		}
		base := h.baselineLocked()
		h.episodes = append(h.episodes, spEpisode{Start: now, Active: sp.Active, Drops: h.dropsLocked(base), baseline: base})
	case sp.Below:
		last.Active = last.Active || sp.Active
		// The drop may have been noticed before a whole minute of it had
		// passed: compare again until the last minute lies inside it.
		if last.baseline != nil {
			last.Drops = h.dropsLocked(last.baseline)
			if now.Sub(last.Start) >= time.Minute {
				last.baseline = nil
			}
		}
	case last != nil:
		last.End = now
	}
	h.seq.Add(1)
}

// baselineLocked is each app's renewals per minute over the oldest minute
// kept: about three minutes before the drop was noticed, which is before
// it began, since the registry notices a drop within two windows.
func (h *spHistory) baselineLocked() map[string]int64 {
	if len(h.perApp) < 2 {
		return nil
	}
	oldest := h.perApp[0]
	end := h.perApp[1]
	for _, t := range h.perApp[1:] {
		end = t
		if t.at.Sub(oldest.at) >= time.Minute {
			break
		}
	}
	base := make(map[string]int64, len(end.totals))
	for app := range end.totals {
		base[app] = perMinute(oldest, end, app)
	}
	return base
}

// dropsLocked compares each app's renewals per minute in the last minute
// with the baseline, and returns the apps that fell most.
func (h *spHistory) dropsLocked(baseline map[string]int64) []appDrop {
	n := len(h.perApp)
	if n < 2 || baseline == nil {
		return nil
	}
	newest := h.perApp[n-1]
	from := h.perApp[0]
	for i := n - 2; i >= 0; i-- {
		from = h.perApp[i]
		if newest.at.Sub(from.at) >= time.Minute {
			break
		}
	}
	var drops []appDrop
	for app, before := range baseline {
		if after := perMinute(from, newest, app); before > after {
			drops = append(drops, appDrop{App: app, Before: before, After: after})
		}
	}
	slices.SortFunc(drops, func(a, b appDrop) int {
		if da, db := a.Before-a.After, b.Before-b.After; da != db {
			if da > db {
				return -1
			}
			return 1
		}
		return strings.Compare(a.App, b.App)
	})
	if len(drops) > maxDrops {
		drops = drops[:maxDrops]
	}
	return drops
}

func perMinute(from, to appTotals, app string) int64 {
	d := to.at.Sub(from.at)
	if d <= 0 {
		return 0
	}
	return int64(float64(to.totals[app]-from.totals[app]) * float64(time.Minute) / float64(d))
}

// view returns the samples oldest first and the episodes newest first.
func (h *spHistory) view() ([]spSample, []spEpisode) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]spSample, 0, len(h.samples))
	out = append(out, h.samples[h.next:]...)
	out = append(out, h.samples[:h.next]...)
	eps := slices.Clone(h.episodes)
	slices.Reverse(eps)
	return out, eps
}
