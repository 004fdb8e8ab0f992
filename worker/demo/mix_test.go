package demo

import (
	"encoding/json"
	"testing"
)

func TestMix(t *testing.T) {
	t.Parallel()

	t.Run("MostlySucceedingWithATrickleOfFailures", func(t *testing.T) {
		t.Parallel()
		m := newMix(42)
		const n = 20_000
		failing := 0
		for range n {
			p := m.next()
			var kw map[string]any
			if err := json.Unmarshal(p.Kwargs, &kw); err != nil {
				t.Fatal(err)
			}
			switch {
			case p.Task == TaskPermanent, p.Task == TaskAlwaysFail, p.Task == TaskPanic:
				failing++
			case p.Task == TaskFlaky && kw["fail_times"].(float64) >= float64(p.MaxAttempts):
				failing++
			}
		}
		share := float64(failing) / n
		if share < 0.05 || share > 0.15 {
			t.Fatalf("%.1f%% of jobs end dead, want a trickle (5-15%%)", share*100)
		}
	})

	t.Run("SameSeedSameJobs", func(t *testing.T) {
		t.Parallel()
		a, b := newMix(1), newMix(1)
		for range 100 {
			if pa, pb := a.next(), b.next(); pa.IdempotencyKey != pb.IdempotencyKey || string(pa.Kwargs) != string(pb.Kwargs) {
				t.Fatalf("diverged: %+v vs %+v", pa, pb)
			}
		}
	})

	t.Run("WeightsSumToTheDocumentedTotal", func(t *testing.T) {
		t.Parallel()
		if m := newMix(1); m.total != 1000 {
			t.Fatalf("weights sum to %d", m.total)
		}
	})
}
