package console

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The y axis has distinct, whole, evenly spaced ticks from 0 to at least
// the highest value at every scale, idle zeros included.
func TestAxisTicks_distinctAtEveryScale(t *testing.T) {
	values := []float64{0, 0.2, 0.5, 1, 1.4, 2, 3, 4.5, 7, 9.99, 10, 11, 37, 99, 100, 149, 1000, 1234.5, 99_999, 3e6, 1e9}
	for _, v := range values {
		ticks := axisTicks(v)
		if len(ticks) < 2 || len(ticks) > maxTickSteps+1 {
			t.Fatalf("axisTicks(%v) = %v: want 2 to %d ticks", v, ticks, maxTickSteps+1)
		}
		if ticks[0] != 0 || ticks[len(ticks)-1] < v {
			t.Fatalf("axisTicks(%v) = %v: want 0 up to at least %v", v, ticks, v)
		}
		step := ticks[1] - ticks[0]
		seen := map[string]bool{}
		for i, tick := range ticks {
			label := strconv.FormatInt(int64(tick), 10)
			if tick != float64(int64(tick)) || seen[label] {
				t.Fatalf("axisTicks(%v) = %v: tick %v labelled %q is not whole or repeats", v, ticks, tick, label)
			}
			seen[label] = true
			if i > 0 && ticks[i]-ticks[i-1] != step {
				t.Fatalf("axisTicks(%v) = %v: uneven steps", v, ticks)
			}
		}
		// Not too much headroom: the top is within one step of 1.1 v.
		if top := ticks[len(ticks)-1]; v >= 1 && top-step >= v*1.1 {
			t.Fatalf("axisTicks(%v) = %v: more than a step above the values", v, ticks)
		}
	}
}

// The chart of an idle registry (every value 0) labels its axis with
// distinct numbers, not 1, 1, 0, 0, 0.
func TestRenderSPChart_idleAxisLabelsDistinct(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var samples []spSample
	for i := range 10 {
		samples = append(samples, spSample{At: now.Add(-time.Duration(i) * time.Minute)})
	}
	svg := string(renderSPChart(samples, now))
	labels := regexp.MustCompile(`text-anchor="end" dominant-baseline="middle">([^<]*)<`).FindAllStringSubmatch(svg, -1)
	if len(labels) < 2 {
		t.Fatalf("y axis labels: %v\n%s", labels, svg)
	}
	seen := map[string]bool{}
	for _, l := range labels {
		if seen[l[1]] {
			t.Fatalf("y axis label %q repeats: %v", l[1], labels)
		}
		seen[l[1]] = true
	}
}
