package console

import (
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart geometry, in SVG user units; the SVG scales to its container.
const (
	chartW, chartH         = 720.0, 220.0
	chartLeft, chartRight  = 56.0, 8.0
	chartTop, chartBottom  = 12.0, 28.0
	chartPlotW, chartPlotH = chartW - chartLeft - chartRight, chartH - chartTop - chartBottom
)

// renderSPChart draws renewals per minute, the threshold and the expected
// renewals over the last hour as an inline SVG, with the periods when
// renewals were below the threshold shaded. It writes numbers and fixed
// words only, so its output is safe to embed unescaped.
func renderSPChart(samples []spSample, now time.Time) template.HTML {
	var b strings.Builder
	b.WriteString(`<svg id="sp-chart" viewBox="0 0 720 220" role="img" aria-label="Renewals per minute, threshold and expected renewals over the last hour" xmlns="http://www.w3.org/2000/svg">`)
	start := now.Add(-historySpan)
	highest := 0.0
	for _, s := range samples {
		highest = max(highest, float64(s.Renews), float64(s.Threshold), s.Expected)
	}
	ticks := axisTicks(highest)
	top := ticks[len(ticks)-1]
	x := func(t time.Time) float64 {
		return chartLeft + chartPlotW*float64(t.Sub(start))/float64(historySpan)
	}
	y := func(v float64) float64 { return chartTop + chartPlotH*(1-v/top) }
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

	// Shaded periods below the threshold (red when self-preservation held
	// expiry back, amber when it is disabled).
	for i := 0; i < len(samples); i++ {
		if !samples[i].Below {
			continue
		}
		j := i
		for j+1 < len(samples) && samples[j+1].Below {
			j++
		}
		end := now
		if j+1 < len(samples) {
			end = samples[j+1].At
		}
		class := "below"
		for k := i; k <= j; k++ {
			if samples[k].Active {
				class = "active"
			}
		}
		x0, x1 := max(x(samples[i].At), chartLeft), x(end)
		b.WriteString(`<rect class="sp-` + class + `" x="` + num(x0) + `" y="` + num(chartTop) + `" width="` + num(max(x1-x0, 1)) + `" height="` + num(chartPlotH) + `"/>`)
		i = j
	}
	// Axes, grid and labels.
	for _, v := range ticks {
		yy := num(y(v))
		b.WriteString(`<line class="grid" x1="` + num(chartLeft) + `" x2="` + num(chartW-chartRight) + `" y1="` + yy + `" y2="` + yy + `"/>`)
		b.WriteString(`<text class="axis" x="` + num(chartLeft-6) + `" y="` + yy + `" text-anchor="end" dominant-baseline="middle">` + strconv.FormatInt(int64(v), 10) + `</text>`)
	}
	for m := 0; m <= 60; m += 10 {
		xx := num(chartLeft + chartPlotW*float64(m)/60)
		label, anchor := "now", "end"
		if m < 60 {
			label, anchor = "−"+strconv.Itoa(60-m)+" min", "middle"
		}
		if m == 0 {
			anchor = "start"
		}
		b.WriteString(`<text class="axis" x="` + xx + `" y="` + num(chartH-8) + `" text-anchor="` + anchor + `">` + label + `</text>`)
	}
	series := []struct {
		id, class string
		v         func(spSample) float64
		known     func(spSample) bool
	}{
		{"chart-expected", "expected", func(s spSample) float64 { return s.Expected }, nil},
		{"chart-threshold", "threshold", func(s spSample) float64 { return float64(s.Threshold) }, nil},
		// Renewals are not known during the first window after opening.
		{"chart-renews", "renews", func(s spSample) float64 { return float64(s.Renews) }, func(s spSample) bool { return !s.Warming }},
	}
	for _, se := range series {
		if len(samples) == 0 {
			break
		}
		b.WriteString(`<path id="` + se.id + `" class="` + se.class + `" d="`)
		penDown := false
		for _, s := range samples {
			if s.At.Before(start) || se.known != nil && !se.known(s) {
				penDown = false
				continue
			}
			if penDown {
				b.WriteByte('L')
			} else {
				b.WriteByte('M')
			}
			penDown = true
			b.WriteString(num(x(s.At)) + " " + num(y(se.v(s))))
		}
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and constant text only
}

// maxTickSteps is the most intervals the y axis is cut into.
const maxTickSteps = 5

// axisTicks returns the y axis's ticks for values up to highest: 0 and
// then up to maxTickSteps more, spaced by one round step (1, 2, 2.5 or 5
// times a power of ten), the last at or above highest plus a tenth of
// headroom. The step is a whole number, at least 1, since what the chart
// counts (renewals and thresholds per minute) is whole: labels printed as
// integers are therefore distinct at every scale, including an idle
// registry's zeros. (The axis used to be a round top cut in four, whose
// quarters of 1.5 printed as 0, 0, 0, 1, 1.)
func axisTicks(highest float64) []float64 {
	target := max(highest*1.1, 1)
	step := niceStep(target / maxTickSteps)
	n := max(int(math.Ceil(target/step-1e-9)), 1)
	ticks := make([]float64, n+1)
	for i := range ticks {
		ticks[i] = step * float64(i)
	}
	return ticks
}

// niceStep is the smallest of 1, 2, 2.5 and 5 times a power of ten that
// is at least v and a whole number (2.5 only from 25 up), never below 1.
func niceStep(v float64) float64 {
	for p := 1.0; ; p *= 10 {
		for _, m := range []float64{1, 2, 2.5, 5} {
			if step := m * p; step >= v && step == math.Trunc(step) {
				return step
			}
		}
	}
}
