package main

import "testing"

func TestWantedTakesEachPartOfOnly(t *testing.T) {
	for _, c := range []struct {
		only, name string
		want       bool
	}{
		{"", "drain best ×1", true},
		{"drain best", "drain best ×1", true},
		{"drain best", "dead-lettering", false},
		{"dead-lettering|console", "dead-lettering", true},
		{"dead-lettering|console", "console", true},
		{"dead-lettering|console", "drain best ×1", false},
		{"|", "drain best ×1", false}, // empty parts match nothing
	} {
		s := &suite{only: c.only}
		if got := s.wanted(c.name); got != c.want {
			t.Errorf("only %q: wanted(%q) = %v, want %v", c.only, c.name, got, c.want)
		}
	}
}
