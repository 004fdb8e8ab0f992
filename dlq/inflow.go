package dlq

import "time"

// Bucketize sums hourly counts into buckets of width from start to end,
// every bucket present (zero when nothing failed in it), oldest first.
func Bucketize(hours []InflowBucket, start, end time.Time, width time.Duration) []InflowBucket {
	var out []InflowBucket
	for t := start.UTC(); t.Before(end); t = t.Add(width) {
		out = append(out, InflowBucket{Start: t})
	}
	for _, h := range hours {
		if h.Start.Before(start) || !h.Start.Before(end) {
			continue
		}
		out[int(h.Start.Sub(start)/width)].N += h.N
	}
	return out
}
