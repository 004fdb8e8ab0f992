package views

import (
	"strings"
	"testing"
)

func TestNewSpark(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		counts []int64
		want   string
	}{
		{"AllZeroAlongTheBottom", []int64{0, 0, 0}, "1.0,23.0 60.0,23.0 119.0,23.0"},
		{"PeakAtTheTop", []int64{0, 4, 2}, "1.0,23.0 60.0,1.0 119.0,12.0"},
		{"OnePoint", []int64{5}, "1.0,1.0"},
		{"Empty", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewSpark(tc.counts, "x").Points; got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if s := NewSpark(make([]int64, 14), ""); len(strings.Fields(s.Points)) != 14 {
		t.Fatal("one point per day")
	}
}
