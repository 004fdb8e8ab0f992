package worker

import (
	"testing"
	"time"
)

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{Base: time.Second, Cap: 30 * time.Second}.withDefaults()
	fixed := func(v float64) func() float64 { return func() float64 { return v } }

	cases := []struct {
		name    string
		attempt int
		rand    float64
		want    time.Duration
	}{
		{"FirstRetryCeilingIsBase", 1, 1, time.Second},
		{"CeilingDoublesPerAttempt", 2, 1, 2 * time.Second},
		{"ThirdAttempt", 3, 1, 4 * time.Second},
		{"FullJitterScalesTheWholeWindow", 3, 0.5, 2 * time.Second},
		{"JitterCanChooseNoDelay", 4, 0, 0},
		{"CappedOnceDoublingPassesCap", 6, 1, 30 * time.Second},
		{"JitterAppliesUnderTheCap", 6, 0.25, 7500 * time.Millisecond},
		{"HugeAttemptDoesNotOverflow", 100, 1, 30 * time.Second},
		{"AttemptZeroTreatedAsFirst", 0, 1, time.Second},
		{"RandAboveOneClamped", 2, 7, 2 * time.Second},
		{"NegativeRandClamped", 2, -1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := p.nextRetryDelay(c.attempt, fixed(c.rand)); got != c.want {
				t.Fatalf("nextRetryDelay(%d, %v) = %s, want %s", c.attempt, c.rand, got, c.want)
			}
		})
	}

	t.Run("DelaysStayInsideCeilingForAnyRand", func(t *testing.T) {
		t.Parallel()
		for attempt := 1; attempt <= 100; attempt++ {
			for _, r := range []float64{0, 0.1, 0.5, 0.999999} {
				d := p.nextRetryDelay(attempt, fixed(r))
				if d < 0 || d > p.Ceiling(attempt) || d > p.Cap {
					t.Fatalf("attempt %d rand %v: delay %s outside [0, %s]", attempt, r, d, p.Ceiling(attempt))
				}
			}
		}
	})

	t.Run("DefaultsAreOneSecondToThirtyMinutes", func(t *testing.T) {
		t.Parallel()
		d := RetryPolicy{}.withDefaults()
		if d.Base != time.Second || d.Cap != time.Hour || d.RandFunc == nil {
			t.Fatalf("defaults: %+v", d)
		}
		if err := d.validate(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("CapBelowBaseRejected", func(t *testing.T) {
		t.Parallel()
		if err := (RetryPolicy{Base: time.Minute, Cap: time.Second}).withDefaults().validate(); err == nil {
			t.Fatal("want an error")
		}
	})
}
