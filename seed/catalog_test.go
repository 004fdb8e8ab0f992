package seed

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SplitsIntoFullBatchesAndARemainder", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var sizes []int
		got, err := inBatches(ctx, 2*batchSize+7, 3, func(_ context.Context, size int) (int, error) {
			mu.Lock()
			sizes = append(sizes, size)
			mu.Unlock()
			return size, nil
		})
		slices.Sort(sizes)
		if err != nil || got != 2*batchSize+7 || !slices.Equal(sizes, []int{7, batchSize, batchSize}) {
			t.Fatalf("inserted %d (%v) in batches %v", got, err, sizes)
		}
	})

	t.Run("FirstErrorStopsTheRest", func(t *testing.T) {
		t.Parallel()
		boom := errors.New("boom")
		calls := 0
		got, err := inBatches(ctx, 10*batchSize, 1, func(_ context.Context, size int) (int, error) {
			calls++
			if calls == 2 {
				return 0, boom
			}
			return size, nil
		})
		if !errors.Is(err, boom) || got != batchSize || calls != 2 {
			t.Fatalf("after an error in batch 2: %d rows, %d calls, %v", got, calls, err)
		}
	})
}

// TestCatalog checks the catalog without a database: every template
// parses, failures are many and distinct, and incidents stay in the 14 days.
func TestCatalog(t *testing.T) {
	t.Parallel()
	cat, err := compileCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cat.failures); n < 30 || n > 60 {
		t.Errorf("%d failures, want 30-60", n)
	}
	seen := map[string]int{}
	for i, f := range cat.failures {
		if j, dup := seen[f.fingerprint]; dup {
			t.Errorf("failures %d and %d share fingerprint %s", j, i, f.fingerprint)
		}
		seen[f.fingerprint] = i
	}
	for _, k := range failures {
		if k.burstSpan > k.burstAgo || k.burstAgo > 14*24*time.Hour {
			t.Errorf("%s %s: incident window outside the last 14 days", k.task, k.class)
		}
		// Only the first 500 bytes of the first line decide the fingerprint;
		// keep room for the substituted values.
		if first, _, _ := strings.Cut(k.message, "\n"); len(first) > 400 {
			t.Errorf("%s %s: first line of %d bytes, want at most 400", k.task, k.class, len(first))
		}
	}
	if _, err := parseTemplate("{no_such_value}"); err == nil {
		t.Error("an unknown placeholder must be an error")
	}
}
