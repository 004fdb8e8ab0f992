package main

import (
	"strings"
	"testing"
)

func TestQuantileNearestRank(t *testing.T) {
	values := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q    float64
		want float64
	}{{0.5, 5}, {0.95, 10}, {0.1, 1}, {0, 1}, {1, 10}} {
		if got := quantile(values, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got == got { // NaN is the only value unequal to itself
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

func TestNumberAndCount(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{1234567, "1,234,567"}, {123.4, "123"}, {12.34, "12.3"}, {1.234, "1.23"}, {0.1234, "0.123"}, {0, "0"}, {3, "3"}} {
		if got := number(tc.v); got != tc.want {
			t.Errorf("number(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := count(-1000); got != "-1,000" {
		t.Errorf("count(-1000) = %q", got)
	}
}

// TestRatiosPairRounds: a ratio is taken within a round, so a machine that
// slows down between rounds moves both engines' figures and not the ratio.
func TestRatiosPairRounds(t *testing.T) {
	r := newResults(3)
	for round, v := range []float64{100, 50, 200} {
		r.add("k", "Redrive", round, v)
		r.add("k", "River", round, 2*v)
	}
	r.add("k", "Redrive", 2, 200)
	got := r.ratios("k")
	if len(got) != 3 || got.min() != 0.5 || got.max() != 0.5 {
		t.Fatalf("ratios = %v, want three times 0.5", got)
	}
	var b strings.Builder
	r.writeTable(&b, []metric{{key: "k", label: "drain", unit: "jobs/s", river: true}})
	if want := "| drain | jobs/s | 100 (50–200) | 200 (100–400) | 0.50 (0.50–0.50) |"; !strings.Contains(b.String(), want) {
		t.Fatalf("table:\n%s\nwant a row %s", b.String(), want)
	}
}

func TestFailedFigureIsShown(t *testing.T) {
	r := newResults(1)
	r.fail("k", "Redrive")
	if got := r.cell("k", "Redrive"); got != "failed" {
		t.Fatalf("cell = %q, want failed", got)
	}
}
