package auth

import (
	"testing"
	"time"
)

func TestThrottleWait(t *testing.T) {
	t.Parallel()
	th := Throttle{}.Defaults() // per name and address: slow after 3 (2 s, doubling), lock after 5 in 15 min for 15 min
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, now.Add(-d))
		}
		return out
	}
	cases := []struct {
		name     string
		failures []time.Time
		wait     time.Duration
		locked   bool
	}{
		{"NoFailures", nil, 0, false},
		{"TwoFailuresNoWait", ago(time.Second, 2*time.Second), 0, false},
		{"ThirdFailureWaitsTwoSeconds", ago(time.Second, 2*time.Second, 3*time.Second), time.Second, false},
		{"ThirdFailureWaitOver", ago(3*time.Second, 4*time.Second, 5*time.Second), 0, false},
		{"FourthDoubles", ago(time.Second, 2*time.Second, 3*time.Second, 4*time.Second), 3 * time.Second, false},
		{"FifthLocksFifteenMinutes", ago(time.Second, 2*time.Second, 3*time.Second, 4*time.Second, 5*time.Second), 15*time.Minute - time.Second, true},
		{"LockHoldsAfterTheWindowCountDrops", ago(14*time.Minute, 20*time.Minute, 21*time.Minute, 22*time.Minute, 23*time.Minute), time.Minute, true},
		{"LockOver", ago(16*time.Minute, 17*time.Minute, 18*time.Minute, 19*time.Minute, 20*time.Minute), 0, false},
		{"SpreadOutFailuresNeverLock", ago(time.Minute, 20*time.Minute, 40*time.Minute, 60*time.Minute, 80*time.Minute), 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wait, locked := th.pairRule().wait(tc.failures, now)
			if wait != tc.wait || locked != tc.locked {
				t.Errorf("wait %s locked %v, want %s %v", wait, locked, tc.wait, tc.locked)
			}
		})
	}
}

// TestThrottleNameRule: failures for a name from anywhere slow from the
// tenth on, the wait doubling up to a minute, and never lock.
func TestThrottleNameRule(t *testing.T) {
	t.Parallel()
	r := Throttle{}.Defaults().nameRule()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	burst := func(n int, ago time.Duration) []time.Time {
		out := make([]time.Time, n)
		for i := range out {
			out[i] = now.Add(-ago)
		}
		return out
	}
	cases := []struct {
		name     string
		failures []time.Time
		wait     time.Duration
	}{
		{"NineNoWait", burst(9, 0), 0},
		{"TenWaitTwoSeconds", burst(10, 0), 2 * time.Second},
		{"ElevenDoubles", burst(11, 0), 4 * time.Second},
		{"CappedAtAMinute", burst(40, 0), time.Minute},
		{"FortyNeverLock", burst(40, 2*time.Minute), 0},
		{"OutsideTheHourForgotten", burst(40, 61*time.Minute), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wait, locked := r.wait(tc.failures, now)
			if wait != tc.wait || locked {
				t.Errorf("wait %s locked %v, want %s and never locked", wait, locked, tc.wait)
			}
		})
	}
	if l := (Throttle{}).Defaults().limit(); l < 10+5 {
		t.Errorf("reads %d failures, too few for the name's wait to reach its cap", l)
	}
}
