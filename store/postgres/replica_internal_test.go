package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// The lag is the age of the oldest primary position the replica has not
// replayed: an idle primary makes no lag however long ago its last commit
// was (which is where now() - pg_last_xact_replay_timestamp() goes wrong),
// and a paused replica's lag grows from the first write it misses.
func TestReplicaLag(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

	t.Run("IdlePrimaryCaughtUpReplicaHasNoLag", func(t *testing.T) {
		var w walSamples
		for s := range 120 {
			w.add(100, at(float64(s)))
			if got := w.lag(100, at(float64(s))); got != 0 {
				t.Fatalf("at %d s: lag %s, want 0", s, got)
			}
		}
	})
	t.Run("PausedReplicaLagGrowsFromTheFirstMissedWrite", func(t *testing.T) {
		var w walSamples
		w.add(100, at(0))
		w.lag(100, at(0))
		w.add(200, at(1)) // a write the replica does not replay
		w.add(200, at(2)) // the primary idles after it
		w.add(300, at(3))
		if got, want := w.lag(100, at(4.5)), 3500*time.Millisecond; got != want {
			t.Fatalf("lag %s, want %s", got, want)
		}
		// It replays the first write, not the second.
		if got, want := w.lag(200, at(5)), 2*time.Second; got != want {
			t.Fatalf("lag %s, want %s", got, want)
		}
		if got := w.lag(300, at(6)); got != 0 {
			t.Fatalf("caught up: lag %s, want 0", got)
		}
	})
	t.Run("BoundedMemory", func(t *testing.T) {
		var w walSamples
		for i := range maxWALSamples * 2 {
			w.add(int64(i+1), at(float64(i)))
		}
		if len(w.lsns) != maxWALSamples || len(w.at) != maxWALSamples {
			t.Fatalf("%d samples kept, want %d", len(w.lsns), maxWALSamples)
		}
	})
}

func TestJudgeReplica(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	behind := func() *walSamples {
		var w walSamples
		w.add(100, now.Add(-45*time.Second))
		return &w
	}
	onReplica := &dlq.ReadState{OnReplica: true}
	for _, tc := range []struct {
		name        string
		obs         observation
		samples     *walSamples
		prev        *dlq.ReadState
		wantReplica bool
		wantProblem string
	}{
		{"CaughtUpReadsTheReplica", observation{inRecovery: true, replayLSN: 100}, behind(), nil, true, ""},
		{"TooFarBehindFallsBack", observation{inRecovery: true, replayLSN: 50}, behind(), onReplica, false, "is 45 s behind (more than 30 s)"},
		{"UnreachableFallsBack", observation{replicaErr: errors.New("connection refused")}, behind(), onReplica, false, "cannot be reached"},
		{"PromotedFallsBack", observation{replayLSN: 100}, behind(), onReplica, false, "is not in recovery (no longer a replica)"},
		{"PrimaryDownKeepsTheChoice", observation{inRecovery: true, primaryErr: errors.New("down")}, behind(), onReplica, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.at = now
			got := judge(tc.obs, tc.samples, tc.prev, 30*time.Second)
			if got.OnReplica != tc.wantReplica || got.Problem != tc.wantProblem {
				t.Fatalf("judge: on replica %v, problem %q; want %v, %q", got.OnReplica, got.Problem, tc.wantReplica, tc.wantProblem)
			}
		})
	}
}

func TestFormatLag(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1400 * time.Millisecond: "1.4 s",
		42 * time.Second:        "42 s",
		185 * time.Second:       "3 min 5 s",
	} {
		if got := dlq.FormatLag(d); got != want {
			t.Errorf("dlq.FormatLag(%s) = %q, want %q", d, got, want)
		}
	}
}
