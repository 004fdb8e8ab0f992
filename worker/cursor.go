package worker

import (
	"math"
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
//
// While a throttle is open the cursor holds on instead. A throttled claim
// comes back short by design (the throttled work waits for room), and a
// claim from the head would read past every held job of a task with no
// room again, each time the worker asks (a cost that grows with the
// backlog: docs/performance.md, "What a throttle costs the claim"). So a
// short throttled claim keeps the positions, the head comes once a poll
// interval, and a queue whose walk read every due job (dlq.Claim's
// Exhausted) moves on to the claim's time: the next walks start past the
// held jobs, which the claim takes from the head as their throttle gives
// room.
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

// advance records claim, which started at from (nil: the head), limit
// asked; failed says it returned an error. A claim from the head starts
// the positions afresh; a short claim after positions with no throttle
// open, or a failed one, sends the next claim to the head.
func (c *claimCursor) advance(now time.Time, from map[string]dlq.Position, claim dlq.Claim, limit int, failed bool) {
	switch {
	case failed || (from != nil && len(claim.Jobs) < limit && !claim.Throttled):
		c.after = nil
		return
	case from == nil:
		c.headAt = now
		c.after = make(map[string]dlq.Position, len(c.after))
	}
	for _, j := range claim.Jobs {
		c.moveTo(j.Queue, dlq.PositionOf(j))
	}
	// Every job due at that time was read: the next walk starts after all
	// of them, whatever their ids.
	for queue, at := range claim.Exhausted {
		c.moveTo(queue, dlq.Position{RunAt: at, ID: math.MaxInt64})
	}
}

// moveTo moves queue's position on to p, never back.
func (c *claimCursor) moveTo(queue string, p dlq.Position) {
	if old, ok := c.after[queue]; !ok || old.Before(p) {
		c.after[queue] = p
	}
}
