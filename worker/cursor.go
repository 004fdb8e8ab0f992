package worker

import (
	"time"

	"github.com/redrive/redrive/dlq"
)

// claimCursor remembers where each queue's last claim ended, so that the
// next claim walks on from there (dlq.ClaimAfter) instead of over the dead
// index entries every job claimed since the last VACUUM leaves behind: in
// a drain of 200,000 jobs at the defaults that walk was half of all the
// database's time. It is the claim loop's alone.
//
// A claim after positions does not take a job due before them: one whose
// enqueue committed after later jobs were claimed (a transaction's now()
// is its start), a rescued or handed-back job, an explicit past run_at.
// So a claim from the head of every queue comes at least every
// PollInterval, and right after a claim after positions came back short:
// the queues look drained, and the head may hold what the walk skipped.
type claimCursor struct {
	after map[string]dlq.Position
	// headAt is when the last claim from the head ran.
	headAt time.Time
}

// next is where the next claim starts: nil for the head of every queue.
func (c *claimCursor) next(now time.Time, headEvery time.Duration) map[string]dlq.Position {
	if len(c.after) == 0 || now.Sub(c.headAt) >= headEvery {
		return nil
	}
	return c.after
}

// advance records a claim that started at from (nil: the head) and took
// jobs, limit asked; failed says it returned an error. A claim from the
// head starts the positions afresh; a short claim after positions, or a
// failed one, sends the next claim to the head.
func (c *claimCursor) advance(now time.Time, from map[string]dlq.Position, jobs []dlq.Job, limit int, failed bool) {
	switch {
	case failed || (from != nil && len(jobs) < limit):
		c.after = nil
		return
	case from == nil:
		c.headAt = now
		c.after = make(map[string]dlq.Position, len(c.after))
	}
	for _, j := range jobs {
		if p, ok := c.after[j.Queue]; !ok || p.Before(dlq.PositionOf(j)) {
			c.after[j.Queue] = dlq.PositionOf(j)
		}
	}
}
