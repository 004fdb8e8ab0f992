package main

import "testing"

func TestParseScaleReadsSuffixes(t *testing.T) {
	for in, want := range map[string]int{"10M": 10_000_000, "2m": 2_000_000, "500k": 500_000, "1000000": 1_000_000} {
		if got, err := parseScale(in); err != nil || got != want {
			t.Errorf("parseScale(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "10G", "1.5M", "-2M", "M"} {
		if got, err := parseScale(in); err == nil {
			t.Errorf("parseScale(%q) = %d, want an error", in, got)
		}
	}
}
