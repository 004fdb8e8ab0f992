package main

import (
	"math"
	"slices"
	"time"
)

// sample is one figure's values, one per run.
type sample []float64

// median of the values; NaN when there are none.
func (s sample) median() float64 { return quantile(s, 0.5) }

func (s sample) min() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return slices.Min(s)
}

func (s sample) max() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	return slices.Max(s)
}

// quantile of values by the nearest-rank method: with 40 requests, p95 is
// the 38th slowest, a request that actually happened.
func quantile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := slices.Clone(values)
	slices.Sort(s)
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(rank, len(s)-1))]
}

// millis turns durations into milliseconds.
func millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d.Microseconds()) / 1000
	}
	return out
}

// perSecond is n things in d, per second.
func perSecond(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
