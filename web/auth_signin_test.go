package web

import (
	"testing"
	"time"
)

func TestThrottleWait(t *testing.T) {
	t.Parallel()
	th := Throttle{}.withDefaults() // slow after 3 (2 s, doubling), lock after 5 in 15 min for 15 min
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
			wait, locked := th.wait(tc.failures, th.SlowAfter, th.LockAfter, now)
			if wait != tc.wait || locked != tc.locked {
				t.Errorf("wait %s locked %v, want %s %v", wait, locked, tc.wait, tc.locked)
			}
		})
	}
}
