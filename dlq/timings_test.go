package dlq_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

func TestTimingBucket(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{99 * time.Microsecond, 0},
		{100 * time.Microsecond, 1},
		{118 * time.Microsecond, 1}, // bucket 1 ends at 100 µs · 2^(1/4) ≈ 118.9 µs
		{119 * time.Microsecond, 2},
		{200 * time.Microsecond, 5},               // one doubling: four buckets on
		{time.Second, 54},                         // 4·log2(10,000) ≈ 53.15, floor + 1
		{1000 * time.Hour, dlq.TimingBuckets - 1}, // past the last bound: the open bucket
	} {
		if got := dlq.TimingBucket(c.d); got != c.want {
			t.Errorf("TimingBucket(%s) = %d, want %d", c.d, got, c.want)
		}
	}
}

// TestTimingQuantileIsWithinNinePercent draws durations over six orders of
// magnitude and checks each percentile read from the histogram, and from
// two halves merged, is within the bucket's 2^(1/8) of the exact one.
func TestTimingQuantileIsWithinNinePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var whole, a, b dlq.TimingHistogram
	var exact []time.Duration
	for i := range 20_000 {
		// Log-uniform between 1 ms and 1,000 s.
		d := time.Duration(math.Pow(10, 6+6*r.Float64()))
		exact = append(exact, d)
		whole.Add(d)
		if i%2 == 0 {
			a.Add(d)
		} else {
			b.Add(d)
		}
	}
	a.Merge(b)
	if !slices.Equal(a, whole) {
		t.Fatal("two halves merged differ from the whole")
	}
	slices.Sort(exact)
	for _, q := range []float64{0.5, 0.95, 0.99} {
		want := exact[int(math.Ceil(q*float64(len(exact))))-1]
		got, ok := whole.Quantile(q)
		if !ok {
			t.Fatalf("p%.0f: empty", q*100)
		}
		if ratio := float64(got) / float64(want); ratio > math.Pow(2, 1.0/8) || ratio < math.Pow(2, -1.0/8) {
			t.Errorf("p%.0f = %s, exact %s: off by a factor %.3f, more than 2^(1/8)", q*100, got, want, ratio)
		}
	}
	if _, ok := (dlq.TimingHistogram{}).Quantile(0.5); ok {
		t.Error("an empty histogram has a median")
	}
	if got, _ := (dlq.TimingHistogram{3}).Quantile(0.99); got >= dlq.TimingBase {
		t.Errorf("durations under TimingBase read as %s", got)
	}
}
