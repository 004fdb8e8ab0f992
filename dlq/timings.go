package dlq

import (
	"math"
	"time"
)

// How a task's timings are summarised. A duration is counted in one bucket
// of a fixed log-scale histogram: bucket 0 holds everything under
// TimingBase, and bucket i ≥ 1 holds [TimingBase·2^((i-1)/4),
// TimingBase·2^(i/4)), four buckets per doubling, the last one open-ended.
// Histograms of the same buckets add up element by element, so a minute's
// summaries from several workers, an hour's minutes and a day's hours are
// merged by addition, exactly, and a percentile is read from the merged
// counts: it is the geometric middle of the bucket that holds the rank, at
// most 2^(1/8)-1 ≈ 9% away from the true value (under TimingBase it is
// only known to be under it). The bucket bounds never change: summaries
// written by one build are read by every other.
const (
	// TimingBase is the upper bound of bucket 0.
	TimingBase = 100 * time.Microsecond
	// TimingBucketsPerDoubling sets the histogram's resolution.
	TimingBucketsPerDoubling = 4
	// TimingBuckets is the number of buckets: the last one starts at
	// TimingBase·2^((TimingBuckets-2)/4), about 30 hours.
	TimingBuckets = 122
)

// TimingsFlushInterval is how often a worker writes the timings it
// counted, by default: how late a task page may be.
const TimingsFlushInterval = 10 * time.Second

// TimingHistogram counts durations per bucket (see TimingBase). It is
// stored trimmed of its trailing empty buckets, so a task whose jobs all
// take milliseconds keeps a few dozen numbers, not TimingBuckets.
type TimingHistogram []int64

// TimingBucket returns the bucket a duration falls in.
func TimingBucket(d time.Duration) int {
	if d < TimingBase {
		return 0
	}
	i := int(math.Floor(TimingBucketsPerDoubling*math.Log2(float64(d)/float64(TimingBase)))) + 1
	return min(i, TimingBuckets-1)
}

// Add counts one duration.
func (h *TimingHistogram) Add(d time.Duration) {
	i := TimingBucket(d)
	if len(*h) <= i {
		*h = append(*h, make(TimingHistogram, i+1-len(*h))...)
	}
	(*h)[i]++
}

// Merge adds the counts of o to h.
func (h *TimingHistogram) Merge(o TimingHistogram) {
	if len(*h) < len(o) {
		*h = append(*h, make(TimingHistogram, len(o)-len(*h))...)
	}
	for i, n := range o {
		(*h)[i] += n
	}
}

// Count is how many durations h holds.
func (h TimingHistogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile (0 < q ≤ 1) of the durations counted:
// the geometric middle of the bucket holding the ceil(q·n)-th smallest,
// or half of TimingBase when that is bucket 0. It returns 0 and false
// when h is empty.
func (h TimingHistogram) Quantile(q float64) (time.Duration, bool) {
	n := h.Count()
	if n == 0 {
		return 0, false
	}
	rank := max(1, int64(math.Ceil(q*float64(n))))
	var seen int64
	for i, c := range h {
		seen += c
		if seen >= rank {
			return timingBucketMiddle(i), true
		}
	}
	return timingBucketMiddle(len(h) - 1), true
}

// timingBucketMiddle is the value a percentile falling in bucket i is
// shown as.
func timingBucketMiddle(i int) time.Duration {
	if i == 0 {
		return TimingBase / 2
	}
	return time.Duration(float64(TimingBase) * math.Exp2((float64(i)-0.5)/TimingBucketsPerDoubling))
}

// TimingSummary is what one worker saw of one task in one period: the
// attempts that ended (runs), those that failed (retried or dead-lettered:
// failures), those dead-lettered, and histograms of how long each attempt
// waited in the queue once due (from run_at to its claim, both by the
// database's clock) and how long its handler ran.
type TimingSummary struct {
	Runs     int64           `json:"runs"`
	Failures int64           `json:"failures"`
	Dead     int64           `json:"dead"`
	Wait     TimingHistogram `json:"wait"`
	Run      TimingHistogram `json:"run"`
}

// Merge adds o to s.
func (s *TimingSummary) Merge(o TimingSummary) {
	s.Runs += o.Runs
	s.Failures += o.Failures
	s.Dead += o.Dead
	s.Wait.Merge(o.Wait)
	s.Run.Merge(o.Run)
}

// TimingSpan is the width of a stored summary: a minute or an hour.
type TimingSpan string

// The spans summaries are kept at: minutes for the last hour's view,
// hours for the day's and the fortnight's.
const (
	TimingMinute TimingSpan = "minute"
	TimingHour   TimingSpan = "hour"
)

// TimingRow is one stored summary: a task's attempts over one span
// starting at Start.
type TimingRow struct {
	Task  string
	Span  TimingSpan
	Start time.Time
	TimingSummary
}

// TimingWindow is a period a task page shows, ending now.
type TimingWindow struct {
	// Name is how the page and the API call it: "1h", "1d" or "14d".
	Name string
	// Length is how far back it reaches.
	Length time.Duration
	// Span is the summaries it adds up: minutes for the hour, hours for
	// the longer windows (so "1d" covers the hours touched by the last 24,
	// up to 25 whole hours).
	Span TimingSpan
}

// TimingWindows returns the periods of a task page, shortest first.
func TimingWindows() []TimingWindow {
	return []TimingWindow{
		{Name: "1h", Length: time.Hour, Span: TimingMinute},
		{Name: "1d", Length: 24 * time.Hour, Span: TimingHour},
		{Name: "14d", Length: 14 * 24 * time.Hour, Span: TimingHour},
	}
}

// TaskTimings is one task over the windows of TimingWindows, in their
// order.
type TaskTimings struct {
	Task    string
	Windows []TimingSummary
}
