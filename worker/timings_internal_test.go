package worker

import (
	"testing"
	"time"
)

// BenchmarkTimingsAdd measures what the timings add to settling a job: a
// batch of 1,000 outcomes of one task counted under one lock. Compare
// with the worker's CPU per job in a drain (make bench: about 16 µs).
func BenchmarkTimingsAdd(b *testing.B) {
	t := newTimings()
	now := time.Now()
	batch := make([]timed, 1000)
	for i := range batch {
		batch[i] = timed{task: "bench.noop", at: now, wait: time.Duration(i) * time.Millisecond, ran: 50 * time.Microsecond}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t.add(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/job")
}
