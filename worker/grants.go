package worker

import (
	"context"
	"math"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
)

// Throttle grants. The worker leases a share of each open throttle that
// touches its queues (queue.RenewGrants) and keeps within it on its own:
// its running jobs per task and per queue (jobLoad) against the grant's
// slots, a token bucket of its own against the grant's start rate. Its
// claims pass each throttle's room, so they lock and count nothing; while
// every room is at least the claim's limit, the claim is the plain one.
const (
	// grantTTL is how long a renewal leases the shares for, by the
	// database's clock. A worker that dies holds its shares this long (its
	// running jobs, until the rescuer requeues them, hold theirs longer).
	grantTTL = 10 * time.Second
	// grantMargin is how long before a grant's end the worker stops using
	// it, by its own monotonic clock counted from before the renewal was
	// sent: a claim sent just before then still commits long before the
	// database lets another worker have the share.
	grantMargin = 5 * time.Second
	// grantRenewal is how often the worker renews while it holds grants:
	// the shares follow the workers that want them (one that joins gets
	// its part as the others renew), and a lifted throttle's grant goes.
	grantRenewal = time.Second
)

// throttleGrants are the worker's grants. The claim loop alone uses them,
// renewing them before a claim, so no claim is in flight while they
// change: a share that shrinks is never used by a claim sent before.
type throttleGrants struct {
	held []*heldGrant
	// renewedAt is when the last renewal (or failed attempt) was sent.
	renewedAt time.Time
	// stale says a claim found a throttle it holds no grant of (new, or
	// changed since): renew before the next claim.
	stale bool
	// failing says the last renewal failed.
	failing bool
}

// heldGrant is one grant with its token bucket.
type heldGrant struct {
	dlq.ThrottleGrant
	// validUntil is the grant's end less grantMargin, by this process's
	// monotonic clock.
	validUntil time.Time
	tokens     float64
	refilledAt time.Time
}

// due reports whether the grants should be renewed before a claim at now:
// every grantRenewal while any is held, and at once when a claim found a
// throttle without one, unless the last renewal failed (then a
// grantRenewal on) or ran within throttleRetry (a throttle changed again
// at once must not spin the claim loop).
func (g *throttleGrants) due(now time.Time) bool {
	since := now.Sub(g.renewedAt)
	switch {
	case g.stale && !g.failing:
		return since >= throttleRetry
	case g.stale || len(g.held) > 0:
		return since >= grantRenewal
	}
	return false
}

// renewed replaces the grants with fresh, renewed at sent. A throttle
// granted before keeps its bucket, capped at the new share's; a new
// grant's bucket starts empty, so that the shares' buckets together never
// hold more than the throttle's own would: a share taken from another
// worker comes without the tokens that worker had saved.
func (g *throttleGrants) renewed(sent time.Time, fresh []dlq.ThrottleGrant) {
	old := make(map[int64]*heldGrant, len(g.held))
	for _, h := range g.held {
		old[h.ThrottleID] = h
	}
	held := make([]*heldGrant, 0, len(fresh))
	for _, f := range fresh {
		h := &heldGrant{ThrottleGrant: f, validUntil: sent.Add(f.ExpiresAt.Sub(f.Now) - grantMargin), refilledAt: sent}
		if o := old[f.ThrottleID]; o != nil && o.PerSecond != nil && f.PerSecond != nil {
			o.refill(sent)
			h.tokens = min(o.tokens, bucketSize(*f.PerSecond))
		}
		held = append(held, h)
	}
	g.held, g.renewedAt, g.stale, g.failing = held, sent, false, false
}

// failed records a renewal that failed at sent. The grants are dropped:
// the renewal may have committed smaller shares before its reply was
// lost. Throttled work waits until a renewal succeeds, a second on.
func (g *throttleGrants) failed(sent time.Time) {
	g.held, g.renewedAt, g.stale, g.failing = nil, sent, true, true
}

// bucketSize is how many tokens a bucket of rate holds: one start at
// least, however slow the rate.
func bucketSize(rate float64) float64 { return max(1, rate) }

// refill adds the tokens earned since the last refill.
func (h *heldGrant) refill(now time.Time) {
	if h.PerSecond == nil {
		return
	}
	if elapsed := now.Sub(h.refilledAt); elapsed > 0 {
		h.tokens = min(bucketSize(*h.PerSecond), h.tokens+*h.PerSecond*elapsed.Seconds())
		h.refilledAt = now
	}
}

// rooms is the room of each grant valid at now, given running, the jobs
// of a throttle's task or queue this worker runs. A lapsed grant is left
// out: the claim then takes none of its throttle's jobs.
func (g *throttleGrants) rooms(now time.Time, running func(kind, name string) int) []queue.Room {
	rooms := make([]queue.Room, 0, len(g.held))
	for _, h := range g.held {
		if !now.Before(h.validUntil) {
			continue
		}
		room := math.MaxInt32
		if h.Slots != nil {
			room = max(0, *h.Slots-running(h.Kind, h.Name))
		}
		if h.PerSecond != nil {
			h.refill(now)
			room = min(room, int(h.tokens))
		}
		rooms = append(rooms, queue.Room{ThrottleID: h.ThrottleID, Revision: h.Revision, Room: room})
	}
	return rooms
}

// spend takes a token for each job started of a throttle with a rate.
func (g *throttleGrants) spend(jobs []dlq.Job) {
	for _, h := range g.held {
		if h.PerSecond == nil {
			continue
		}
		for i := range jobs {
			if h.Kind == dlq.PauseTask && jobs[i].Task == h.Name || h.Kind == dlq.PauseQueue && jobs[i].Queue == h.Name {
				h.tokens--
			}
		}
	}
}

// renewGrants renews the worker's grants if they are due. The renewal
// waits for the throttles' locks, which an operator's change or another
// worker's renewal holds for milliseconds; it gives up after grantRenewal,
// since the claim waits for it.
func (w *Worker) renewGrants(ctx context.Context) {
	sent := time.Now()
	if !w.grants.due(sent) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, grantRenewal)
	defer cancel()
	fresh, err := w.store.RenewGrants(ctx, w.cfg.ID, w.cfg.Queues, w.taskNames, grantTTL)
	if err != nil {
		w.grants.failed(sent)
		w.noteFailure(err)
		w.log.Warn("renewing throttle grants failed; throttled work waits for the next renewal", "err", err)
		return
	}
	w.grants.renewed(sent, fresh)
}

// dropGrants gives the worker's grants up as it stops claiming, so that
// the other workers get its shares at their next renewal rather than at
// the grants' end; its running jobs still count, as held, until they
// finish.
func (w *Worker) dropGrants(detached context.Context) {
	if len(w.grants.held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(detached, handBackTimeout)
	defer cancel()
	if err := w.store.DropGrants(ctx, w.cfg.ID); err != nil {
		w.log.Warn("giving up throttle grants failed; they lapse by themselves", "err", err, "after", grantTTL)
	}
	w.grants.held = nil
}

// jobLoad counts the claims this worker holds that the database has
// running, by task and by queue: what counts against its grants. A claim
// counts from its start until its outcome is written (release) or, when
// that was given up, until the rescuer has taken its job (forgetSettled).
type jobLoad struct {
	byTask, byQueue map[string]int
}

// add counts n more (or fewer) claims of task on queue.
func (l *jobLoad) add(task, queue string, n int) {
	if l.byTask == nil {
		l.byTask, l.byQueue = map[string]int{}, map[string]int{}
	}
	l.byTask[task] += n
	l.byQueue[queue] += n
	if l.byTask[task] == 0 {
		delete(l.byTask, task)
	}
	if l.byQueue[queue] == 0 {
		delete(l.byQueue, queue)
	}
}

// of is the count of a throttle's kind and name.
func (l *jobLoad) of(kind, name string) int {
	if kind == dlq.PauseQueue {
		return l.byQueue[name]
	}
	return l.byTask[name]
}

// runningOf is jobLoad.of under the worker's lock.
func (w *Worker) runningOf(kind, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.load.of(kind, name)
}
