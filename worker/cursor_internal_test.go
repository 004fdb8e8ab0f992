package worker

import (
	"math"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// TestClaimCursor walks the cursor through a backlog on two queues: each
// queue's position is the furthest job claimed from it, a claim from the
// head starts them afresh, and the head comes back after a short claim,
// after a failed one, and once headEvery has passed.
func TestClaimCursor(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	job := func(queue string, id int64, runAt time.Duration) dlq.Job {
		return dlq.Job{ID: id, Queue: queue, RunAt: t0.Add(runAt)}
	}
	const every = time.Second
	var c claimCursor
	if from := c.next(t0, every); from != nil {
		t.Fatalf("a new cursor starts at %v, want the head (nil)", from)
	}

	// A full claim from the head: each queue's furthest job, by run_at
	// then id, whatever order the claim returned them in.
	c.advance(t0, nil, claimOf(job("a", 7, 2), job("a", 3, 1), job("b", 9, 1), job("a", 5, 2)), 4, false)
	want := map[string]dlq.Position{"a": {RunAt: t0.Add(2), ID: 7}, "b": {RunAt: t0.Add(1), ID: 9}}
	from := c.next(t0.Add(10*time.Millisecond), every)
	if len(from) != 2 || from["a"] != want["a"] || from["b"] != want["b"] {
		t.Fatalf("after a claim from the head the next starts at %v, want %v", from, want)
	}

	// A full claim after the positions moves only the queue it took from.
	c.advance(t0, from, claimOf(job("a", 11, 3), job("a", 12, 3)), 2, false)
	from = c.next(t0.Add(20*time.Millisecond), every)
	if from["a"] != (dlq.Position{RunAt: t0.Add(3), ID: 12}) || from["b"] != want["b"] {
		t.Fatalf("after a claim after positions the next starts at %v", from)
	}

	// Past headEvery since the last claim from the head: the head again.
	if from := c.next(t0.Add(every), every); from != nil {
		t.Fatalf("a poll interval after the last claim from the head the next starts at %v, want the head", from)
	}

	// A short claim after positions, or a failed one: the head next.
	c.advance(t0, from, claimOf(job("b", 13, 4)), 2, false)
	if from := c.next(t0.Add(30*time.Millisecond), every); from != nil {
		t.Fatalf("after a short claim after positions the next starts at %v, want the head", from)
	}
	c.advance(t0, nil, claimOf(job("a", 14, 5)), 1, false)
	if from := c.next(t0.Add(40*time.Millisecond), every); from == nil {
		t.Fatal("after a full claim from the head the next starts at the head again, want after its position")
	}
	c.advance(t0, c.next(t0.Add(40*time.Millisecond), every), dlq.Claim{}, 1, true)
	if from := c.next(t0.Add(50*time.Millisecond), every); from != nil {
		t.Fatalf("after a failed claim the next starts at %v, want the head", from)
	}
}

func claimOf(jobs ...dlq.Job) dlq.Claim { return dlq.Claim{Jobs: jobs} }

// TestClaimCursorWhileThrottled: a throttled claim comes back short by
// design, so it keeps the positions rather than sending the next claim to
// the head (which would read past a full throttle's held jobs again), and
// a queue whose walk read every due job moves on to the claim's time. The
// head still comes once headEvery has passed.
func TestClaimCursorWhileThrottled(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const every = time.Second
	var c claimCursor
	// From the head: one job of a, and b read to its end (only held jobs
	// were left in it).
	c.advance(t0, nil, dlq.Claim{Jobs: []dlq.Job{{ID: 3, Queue: "a", RunAt: t0}}, Throttled: true,
		Exhausted: map[string]time.Time{"b": t0.Add(time.Second)}}, 10, false)
	from := c.next(t0.Add(10*time.Millisecond), every)
	if from["a"] != (dlq.Position{RunAt: t0, ID: 3}) || from["b"] != (dlq.Position{RunAt: t0.Add(time.Second), ID: math.MaxInt64}) {
		t.Fatalf("after a throttled claim from the head the next starts at %v, want a after job 3 and b after every job due at its time", from)
	}
	// Short, throttled, after positions: the same positions next, moved
	// on where the claim took or read on.
	c.advance(t0, from, dlq.Claim{Throttled: true, Exhausted: map[string]time.Time{"a": t0.Add(2 * time.Second)}}, 10, false)
	from = c.next(t0.Add(20*time.Millisecond), every)
	if from == nil || from["a"] != (dlq.Position{RunAt: t0.Add(2 * time.Second), ID: math.MaxInt64}) || from["b"].ID != math.MaxInt64 {
		t.Fatalf("after a short throttled claim after positions the next starts at %v, want the positions kept and a moved on", from)
	}
	// A position never moves back.
	c.advance(t0, from, dlq.Claim{Throttled: true, Exhausted: map[string]time.Time{"a": t0}}, 10, false)
	if got := c.next(t0.Add(30*time.Millisecond), every)["a"]; got.RunAt != t0.Add(2*time.Second) {
		t.Fatalf("an earlier time moved a's position back to %v", got)
	}
	if from := c.next(t0.Add(every), every); from != nil {
		t.Fatalf("a poll interval after the last claim from the head the next starts at %v, want the head", from)
	}
}
