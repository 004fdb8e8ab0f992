package seed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/grouping"
)

func TestInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SplitsIntoFullBatchesAndARemainder", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var sizes []int
		got, err := inBatches(ctx, 3, batchSizes(2*batchSize+7), func(_ context.Context, size int) (int, error) {
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
		got, err := inBatches(ctx, 1, batchSizes(10*batchSize), func(_ context.Context, size int) (int, error) {
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

// TestBatchesAreStretchesOfTime checks that each batch is all pending or
// all settled and oldest first, that the batches of one kind in a span
// follow one another in time, at most batchSize each and all full but the
// last of the span, and that the sizes add up.
func TestBatchesAreStretchesOfTime(t *testing.T) {
	t.Parallel()
	cat, err := compileCatalog()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	n := drawSpan + batchSize/2 + 3
	batches := make(chan batch)
	go func() {
		defer close(batches)
		cat.batches(n, now)(context.Background(), batches)
	}()
	total, kinds := 0, map[bool]int{}
	prev := map[bool][]draw{} // the last batch of each kind
	partial := map[bool]int{} // batches of each kind under batchSize, in the first span
	for b := range batches {
		total += len(b.draws)
		kinds[b.settled]++
		if len(b.draws) == 0 || len(b.draws) > batchSize {
			t.Fatalf("a batch of %d draws", len(b.draws))
		}
		if !slices.IsSortedFunc(b.draws, func(x, y draw) int { return cmp.Compare(x.failedAtMicro, y.failedAtMicro) }) {
			t.Errorf("a batch is not oldest first")
		}
		for _, d := range b.draws {
			if d.pending() == b.settled {
				t.Fatalf("a batch with settled=%v holds a draw with pending=%v", b.settled, d.pending())
			}
		}
		if total <= drawSpan {
			// Within the first span, a batch starts where the previous one
			// of its kind ended.
			if p := prev[b.settled]; len(p) > 0 && b.draws[0].failedAtMicro < p[len(p)-1].failedAtMicro {
				t.Errorf("a batch starts at %s, before the previous of its kind ends (%s)", b.draws[0].failedAt(), p[len(p)-1].failedAt())
			}
			if len(b.draws) < batchSize {
				partial[b.settled]++
			}
		}
		prev[b.settled] = b.draws
	}
	if total != n {
		t.Errorf("%d draws in all, want %d", total, n)
	}
	if kinds[false] < drawSpan/batchSize/2 || kinds[true] < 2 {
		t.Errorf("%d pending batches and %d settled ones, want both kinds", kinds[false], kinds[true])
	}
	if partial[false] > 1 || partial[true] > 1 {
		t.Errorf("%d pending and %d settled batches of the first span not full, want at most one each", partial[false], partial[true])
	}
}

// batchSizes produces the sizes of n rows' batches, as DeadLetters cuts its
// draws.
func batchSizes(n int) func(context.Context, chan<- int) {
	return func(ctx context.Context, batches chan<- int) {
		for left := n; left > 0; left -= batchSize {
			select {
			case batches <- min(batchSize, left):
			case <-ctx.Done():
				return
			}
		}
	}
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
	checkCatalogGroups(t, cat)
	for _, k := range failures {
		if k.burstSpan > k.burstAgo || k.burstAgo > 14*24*time.Hour {
			t.Errorf("%s %s: incident window outside the last 14 days", k.task, k.class)
		}
		// Only the first 500 bytes of the first line decide the group;
		// keep room for the substituted values.
		if first, _, _ := strings.Cut(k.message, "\n"); len(first) > 400 {
			t.Errorf("%s %s: first line of %d bytes, want at most 400", k.task, k.class, len(first))
		}
	}
	if _, err := parseTemplate("{no_such_value}"); err == nil {
		t.Error("an unknown placeholder must be an error")
	}
}

// checkCatalogGroups groups letters of every failure of the catalog, drawn
// in a random order with fresh values, as the worker groups them: each
// failure must be exactly one group.
func checkCatalogGroups(t *testing.T, cat compiled) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	g := grouping.New(nil)
	var truth []int
	var ids []string
	for range 40 * len(cat.failures) {
		i := r.IntN(len(cat.failures))
		f := cat.failures[i]
		drawn := make([]string, len(values))
		for _, u := range f.uses {
			drawn[u] = values[u].draw(r, now)
		}
		id, err := g.Group(context.Background(), grouping.Letter{Task: f.task.name, Class: f.class,
			Message: f.message.fill(drawn), Traceback: f.traceback.fill(drawn)})
		if err != nil {
			t.Fatal(err)
		}
		truth, ids = append(truth, i), append(ids, id)
	}
	ids = g.Resolve(ids)
	groupsOf := map[int]map[string]bool{}
	failuresOf := map[string]map[int]bool{}
	for n, i := range truth {
		if groupsOf[i] == nil {
			groupsOf[i] = map[string]bool{}
		}
		if failuresOf[ids[n]] == nil {
			failuresOf[ids[n]] = map[int]bool{}
		}
		groupsOf[i][ids[n]], failuresOf[ids[n]][i] = true, true
	}
	for i, gs := range groupsOf {
		if len(gs) > 1 {
			f := cat.failures[i]
			t.Errorf("%s %s %q: %d groups, want 1", f.task.name, f.class, f.message.fill(samples()), len(gs))
		}
	}
	for id, fs := range failuresOf {
		if len(fs) > 1 {
			var names []string
			for i := range fs {
				f := cat.failures[i]
				names = append(names, fmt.Sprintf("%s %s %q", f.task.name, f.class, f.message.fill(samples())))
			}
			t.Errorf("group %s holds %d failures: %s", id, len(fs), strings.Join(names, "; "))
		}
	}
}
