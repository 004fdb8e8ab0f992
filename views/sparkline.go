package views

import (
	"strconv"
	"strings"
)

// Spark is a small inflow chart: one point per bucket, oldest first.
type Spark struct {
	Points string // SVG polyline points in a SparkWidth x SparkHeight box
	Label  string // the numbers in words, for screen readers and hover
	Max    int64
}

// The sparkline's drawing box; CSS sets its rendered size.
const (
	SparkWidth  = 120
	SparkHeight = 24
)

// NewSpark scales counts into polyline points. The line keeps a one-unit
// margin so a flat zero line and the peak are both visible; an all-zero
// series is drawn along the bottom.
func NewSpark(counts []int64, label string) Spark {
	var peak int64
	for _, n := range counts {
		peak = max(peak, n)
	}
	var b strings.Builder
	step := 0.0
	if len(counts) > 1 {
		step = float64(SparkWidth-2) / float64(len(counts)-1)
	}
	for i, n := range counts {
		x := 1 + step*float64(i)
		y := float64(SparkHeight - 1)
		if peak > 0 {
			y = float64(SparkHeight-1) - float64(n)/float64(peak)*float64(SparkHeight-2)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
	}
	return Spark{Points: b.String(), Label: label, Max: peak}
}
