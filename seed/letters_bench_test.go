package seed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/seed"
	"github.com/redrive/redrive/store/storetest"
)

// BenchmarkDeadLetters measures bulk seeding into a migrated database
// with every index and trigger of the real schema. One op is one call of
// the size in the name; letters/s is the figure to compare. The table keeps
// growing across iterations, as it does when seeding a million.
func BenchmarkDeadLetters(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("letters=%d", n), func(b *testing.B) {
			store := storetest.NewStores(storetest.NewDB(b).DB)
			now := time.Now()
			for b.Loop() {
				got, err := seed.DeadLetters(ctx, store.Letters, store.Groups, n, now, seed.Options{})
				if err != nil || got != n {
					b.Fatalf("seeded %d of %d: %v", got, n, err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "letters/s")
		})
	}
}
