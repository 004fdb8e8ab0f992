package views

import (
	"math"
	"strconv"
)

// BarChart is a server-rendered SVG bar chart: one bar per time bucket,
// each with its exact count in a tooltip and, optionally, a link.
type BarChart struct {
	// ID makes the chart's element ids unique on the page.
	ID string
	// Title names the chart for screen readers ("Dead letters per hour").
	Title string
	// YLabel names what the bars count; XLabel names the buckets.
	YLabel string
	XLabel string
	Bars   []Bar
	// Empty is shown instead of the chart when every bar is zero.
	Empty string
	// Note is a line under the chart ("the pale bar is still filling").
	Note string
	// Marks are moments drawn as lines across the chart ("first seen").
	Marks []ChartMark
}

// ChartMark is a moment marked on a BarChart: a dashed line at the start of
// a bar, labelled at the top.
type ChartMark struct {
	// Bar is the index of the bar whose bucket holds the moment.
	Bar   int
	Label string
}

// Bar is one bucket of a BarChart.
type Bar struct {
	// Label is shown under the bar; "" leaves it unlabelled (a chart of 24
	// hours labels every few bars).
	Label string
	// Tip is the exact count and time span, shown on hover and read by
	// screen readers: "14:00–15:00 UTC: 1,234 dead letters".
	Tip   string
	Value int64
	// Href opens the letters behind the bar; "" makes the bar plain.
	Href string
	// Current marks the bucket still filling (this hour, today).
	Current bool
	// MinorLabel marks a label a narrow screen may leave out.
	MinorLabel bool
}

// Chart geometry in SVG user units. The viewBox scales to the panel; on a
// phone the CSS enlarges the labels so they stay legible as it shrinks.
const (
	chartW       = 600.0
	chartH       = 190.0
	chartLeft    = 46.0
	chartRight   = 18.0 // room for half of the last bar's label
	chartTop     = 10.0
	chartBottom  = 34.0
	chartBarFill = 0.76 // share of a bucket's width the bar covers
)

// chartLayout is a BarChart measured out for drawing.
type chartLayout struct {
	BaseY  string
	TopY   string
	LeftX  string
	RightX string
	Ticks  []chartTick
	Bars   []barLayout
	Marks  []markLayout
}

// markLayout places a ChartMark: its line at X, its label at LabelX,
// at the top of the plot, left of the line (before a first sighting the
// bars are empty) unless the line is too near the left edge.
type markLayout struct {
	X, LabelX, Anchor string
	Label             string
}

type chartTick struct {
	Y     string
	Label string
}

type barLayout struct {
	Bar
	X, Y, W, H string
	// SlotX and SlotW span the whole bucket: the hover and click target,
	// so a zero or tiny bar is still easy to point at.
	SlotX, SlotW string
	LabelX       string
}

// IsEmpty reports whether there is nothing to draw.
func (c BarChart) IsEmpty() bool {
	for _, b := range c.Bars {
		if b.Value > 0 {
			return false
		}
	}
	return true
}

func (c BarChart) layout() chartLayout {
	var peak int64
	for _, b := range c.Bars {
		peak = max(peak, b.Value)
	}
	top := niceCeil(peak)
	plotH := chartH - chartTop - chartBottom
	plotW := chartW - chartLeft - chartRight
	baseY := chartTop + plotH
	l := chartLayout{BaseY: svgCoord(baseY), TopY: svgCoord(chartTop), LeftX: svgCoord(chartLeft), RightX: svgCoord(chartW - chartRight)}
	for _, v := range []int64{0, top / 2, top} {
		if v == 0 && top == 0 {
			continue
		}
		y := baseY - float64(v)/float64(max(top, 1))*plotH
		l.Ticks = append(l.Ticks, chartTick{Y: svgCoord(y), Label: shortNumber(v)})
	}
	if len(c.Bars) == 0 {
		return l
	}
	slot := plotW / float64(len(c.Bars))
	w := slot * chartBarFill
	for i, b := range c.Bars {
		h := float64(b.Value) / float64(max(top, 1)) * plotH
		if b.Value > 0 {
			h = max(h, 2) // one letter among thousands still shows
		}
		x := chartLeft + float64(i)*slot
		l.Bars = append(l.Bars, barLayout{
			Bar: b,
			X:   svgCoord(x + (slot-w)/2), Y: svgCoord(baseY - h), W: svgCoord(w), H: svgCoord(h),
			SlotX: svgCoord(x), SlotW: svgCoord(slot),
			LabelX: svgCoord(x + slot/2),
		})
	}
	for _, m := range c.Marks {
		if m.Bar < 0 || m.Bar >= len(c.Bars) {
			continue
		}
		x := chartLeft + float64(m.Bar)*slot
		ml := markLayout{X: svgCoord(x), LabelX: svgCoord(x - 4), Anchor: "end", Label: m.Label}
		if x < chartLeft+plotW*0.2 {
			ml.LabelX, ml.Anchor = svgCoord(x+4), "start"
		}
		l.Marks = append(l.Marks, ml)
	}
	return l
}

// chartMarkLabelY is the baseline of the marks' labels, inside the top of
// the plot.
func chartMarkLabelY() string { return svgCoord(chartTop + 12) }

// niceCeil rounds n up to a round number for the top of the y axis: 1, 2,
// 4 or 5 times a power of ten (and at least 2, so the axis has a middle).
func niceCeil(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if n <= 2 {
		return 2
	}
	mag := math.Pow(10, math.Floor(math.Log10(float64(n))))
	for _, m := range []float64{1, 2, 4, 5, 10} {
		if v := int64(math.Round(m * mag)); v >= n {
			return v
		}
	}
	return int64(math.Round(10 * mag))
}

// shortNumber writes an axis label compactly: 950, 1.5k, 20k, 3M.
func shortNumber(n int64) string {
	switch {
	case n >= 1_000_000:
		return trimZero(float64(n)/1e6) + "M"
	case n >= 10_000:
		return strconv.FormatInt(n/1000, 10) + "k"
	case n >= 1_000:
		return trimZero(float64(n)/1e3) + "k"
	default:
		return strconv.FormatInt(n, 10)
	}
}

func trimZero(v float64) string {
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		return s[:len(s)-2]
	}
	return s
}

// svgCoord formats an SVG coordinate or length to one decimal: finer
// than a pixel is noise in the markup.
func svgCoord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// chartViewBox is the SVG viewBox of every bar chart.
func chartViewBox() string { return "0 0 " + svgCoord(chartW) + " " + svgCoord(chartH) }

// chartYLabelTransform places the y-axis label rotated along the axis.
func chartYLabelTransform() string {
	return "translate(12 " + svgCoord(chartTop+(chartH-chartTop-chartBottom)/2) + ") rotate(-90)"
}

// chartXLabelY is where the x-axis caption sits, under the tick labels.
func chartXLabelY() string { return svgCoord(chartH - 4) }

// chartTickLabelY is the baseline of the bars' labels.
func chartTickLabelY() string { return svgCoord(chartH - chartBottom + 14) }

// chartXLabelX centres the x-axis caption under the plot.
func chartXLabelX() string { return svgCoord(chartLeft + (chartW-chartLeft-chartRight)/2) }

// role is the chart's ARIA role: an image, unless its bars are links, which
// an image may not hold (axe's nested-interactive); then a group of them.
func (c BarChart) role() string {
	for _, b := range c.Bars {
		if b.Href != "" {
			return "group"
		}
	}
	return "img"
}

// newestTip is what the readout under a chart says before a bar is
// pointed at: the newest bucket, the one people look at first.
func (c BarChart) newestTip() string {
	if len(c.Bars) == 0 {
		return ""
	}
	return "Newest: " + c.Bars[len(c.Bars)-1].Tip
}
