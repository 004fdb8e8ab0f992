package store_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/storetest"
)

func throttleParams(kind, name string, maxRunning int, perSecond float64) dlq.ThrottleParams {
	p := dlq.ThrottleParams{Kind: kind, Name: name, Reason: "provider struggling", Actor: dlq.Actor{Name: "alice"}, Now: time.Now()}
	if maxRunning > 0 {
		p.MaxRunning = &maxRunning
	}
	if perSecond > 0 {
		p.MaxPerSecond = &perSecond
	}
	return p
}

// claimTasks claims up to limit jobs of the default queue and counts them
// by task.
func claimTasks(t *testing.T, st *storetest.Stores, worker string, limit int) (map[string]int, dlq.Claim) {
	t.Helper()
	c, err := st.Queue.ClaimThrottled(context.Background(), worker, []string{"default"}, nil, limit, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	byTask := map[string]int{}
	for _, j := range c.Jobs {
		byTask[j.Task]++
	}
	return byTask, c
}

func TestThrottle(t *testing.T) {
	t.Parallel()

	t.Run("RefusesBadInputWithWords", func(t *testing.T) {
		t.Parallel()
		st := storetest.NewStores(storetest.NewDB(t).DB)
		zero, huge, slow := 0, dlq.MaxThrottleRunning+1, 0.001
		for name, tc := range map[string]struct {
			p     dlq.ThrottleParams
			field string
		}{
			"NoLimit":        {throttleParams("task", "payments.charge", 0, 0), "max_running"},
			"ZeroRunning":    {dlq.ThrottleParams{Kind: "task", Name: "t", Reason: "r", MaxRunning: &zero}, "max_running"},
			"HugeRunning":    {dlq.ThrottleParams{Kind: "task", Name: "t", Reason: "r", MaxRunning: &huge}, "max_running"},
			"TooSlowARate":   {dlq.ThrottleParams{Kind: "task", Name: "t", Reason: "r", MaxPerSecond: &slow}, "max_per_second"},
			"NoReason":       {throttleParams("task", "t", 1, 0), ""},
			"BadKind":        {throttleParams("worker", "t", 1, 0), "kind"},
			"BadQueueName":   {throttleParams("queue", "no spaces", 1, 0), "queue"},
			"UntilInThePast": {throttleParams("task", "t", 1, 0), "until"},
		} {
			tc.p.Now = time.Now()
			switch name {
			case "NoReason":
				tc.p.Reason, tc.field = " ", "reason"
			case "UntilInThePast":
				past := time.Now().Add(-time.Minute)
				tc.p.Until = &past
			}
			_, err := st.Queue.SetThrottle(context.Background(), tc.p)
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tc.field] == "" {
				t.Errorf("%s: got %v, want a validation error on %q", name, err, tc.field)
			}
		}
		if open, _, err := st.Queue.OpenThrottles(context.Background()); err != nil || len(open) != 0 {
			t.Fatalf("refused throttles left %d open (%v)", len(open), err)
		}
	})

	t.Run("SecondThrottleIsAConflictChangeAndLiftAreAudited", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		ctx := context.Background()
		first, err := st.Queue.SetThrottle(ctx, throttleParams("task", "payments.charge", 5, 0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Queue.SetThrottle(ctx, throttleParams("task", "payments.charge", 1, 0))
		var tc *dlq.ThrottleConflictError
		if !errors.As(err, &tc) || !errors.Is(err, dlq.ErrConflict) || tc.Throttle.ID != first.Throttle.ID {
			t.Fatalf("second throttle: %v, want a conflict naming throttle %d", err, first.Throttle.ID)
		}
		change := throttleParams("", "", 2, 0.5)
		change.ID, change.Actor.Name, change.Reason = first.Throttle.ID, "bob", "slower still"
		changed, err := st.Queue.SetThrottle(ctx, change)
		if err != nil {
			t.Fatal(err)
		}
		if th := changed.Throttle; *th.MaxRunning != 2 || *th.MaxPerSecond != 0.5 || th.ChangedBy == nil || *th.ChangedBy != "bob" || th.SetBy != "alice" {
			t.Fatalf("changed throttle: %+v", th)
		}
		var before int
		if err := db.Get(&before, `SELECT (details->'before'->>'max_running')::int FROM audit_events WHERE action = 'throttle_change'`); err != nil || before != 5 {
			t.Fatalf("the change's audit entry keeps max_running %d before (%v), want 5", before, err)
		}
		if _, err := st.Queue.LiftThrottle(ctx, dlq.LiftParams{ID: first.Throttle.ID, Actor: dlq.Actor{Name: "carol"}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		_, err = st.Queue.LiftThrottle(ctx, dlq.LiftParams{ID: first.Throttle.ID, Actor: dlq.Actor{Name: "dave"}, Now: time.Now()})
		if !errors.As(err, &tc) || !tc.Ended {
			t.Fatalf("second lift: %v, want a conflict saying it ended", err)
		}
		_, err = st.Queue.SetThrottle(ctx, change)
		if !errors.As(err, &tc) || !tc.Ended {
			t.Fatalf("change after the lift: %v, want a conflict saying it ended", err)
		}
		var actions []string
		if err := db.Select(&actions, `SELECT action FROM audit_events WHERE action LIKE 'throttle%' ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		if len(actions) != 3 || actions[0] != dlq.ActionThrottle || actions[1] != dlq.ActionThrottleChange || actions[2] != dlq.ActionThrottleLift {
			t.Fatalf("audit actions %v, want throttle, throttle_change, throttle_lift", actions)
		}
	})

	// The claim takes at most max_running of a throttled task's jobs,
	// counting those running already, and the rest of the queue as usual.
	t.Run("ClaimKeepsTheTaskWithinItsRunningLimit", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 10, "default", "payments.charge", dlq.StateAvailable)
		insertJobs(t, db, 5, "default", "emails.send", dlq.StateAvailable)
		if _, err := st.Queue.SetThrottle(context.Background(), throttleParams("task", "payments.charge", 3, 0)); err != nil {
			t.Fatal(err)
		}
		got, c := claimTasks(t, st, "w1", 100)
		if got["payments.charge"] != 3 || got["emails.send"] != 5 || !c.Throttled {
			t.Fatalf("first claim took %v (throttled %v), want 3 payments.charge, 5 emails.send, throttled", got, c.Throttled)
		}
		if got, _ := claimTasks(t, st, "w2", 100); len(got) != 0 {
			t.Fatalf("a claim with the throttle full took %v", got)
		}
		// One finishes: one slot for the next claim.
		var done []dlq.Lease
		for _, j := range c.Jobs {
			if j.Task == "payments.charge" {
				done = append(done, dlq.Lease{Worker: "w1", JobID: j.ID, Attempt: j.Attempt})
				break
			}
		}
		if _, err := st.Queue.CompleteMany(context.Background(), "w1", done); err != nil {
			t.Fatal(err)
		}
		if got, _ := claimTasks(t, st, "w2", 100); got["payments.charge"] != 1 {
			t.Fatalf("after one finished the claim took %v, want 1 payments.charge", got)
		}
	})

	// A queue's throttle caps the queue; a throttle another claim holds
	// has no room for this one, which takes the rest without waiting.
	t.Run("QueueThrottleAndAHeldThrottle", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 10, "default", "emails.send", dlq.StateAvailable)
		res, err := st.Queue.SetThrottle(context.Background(), throttleParams("queue", "default", 4, 0))
		if err != nil {
			t.Fatal(err)
		}
		tx := db.MustBegin()
		defer tx.Rollback()
		tx.MustExec(`SELECT 1 FROM throttles WHERE id = $1 FOR UPDATE`, res.Throttle.ID)
		if got, c := claimTasks(t, st, "w1", 100); len(got) != 0 || !c.Throttled {
			t.Fatalf("with the throttle held elsewhere the claim took %v (throttled %v), want nothing, throttled", got, c.Throttled)
		}
		_ = tx.Rollback()
		if got, _ := claimTasks(t, st, "w1", 100); got["emails.send"] != 4 {
			t.Fatalf("claim took %v, want the queue's 4", got)
		}
	})

	// The start rate: a full bucket of max(1, rate) tokens at first, then
	// rate tokens a second.
	t.Run("ClaimKeepsTheStartRate", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 20, "default", "payments.charge", dlq.StateAvailable)
		if _, err := st.Queue.SetThrottle(context.Background(), throttleParams("task", "payments.charge", 0, 2)); err != nil {
			t.Fatal(err)
		}
		if got, _ := claimTasks(t, st, "w1", 100); got["payments.charge"] != 2 {
			t.Fatalf("first claim took %v, want the bucket's 2", got)
		}
		if got, _ := claimTasks(t, st, "w1", 100); got["payments.charge"] != 0 {
			t.Fatalf("an immediate second claim took %v, want none", got)
		}
		time.Sleep(600 * time.Millisecond)
		if got, _ := claimTasks(t, st, "w1", 100); got["payments.charge"] != 1 {
			t.Fatalf("claim after 0.6 s took %v, want 1 (2 a second)", got)
		}
	})

	// A claim says it read a queue to its end (Exhausted) only when it
	// took every job it read there: not when it dropped some past a
	// throttle's room, nor when the limit across queues left some.
	t.Run("ExhaustedOnlyWhenEveryJobReadWasTaken", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		ctx := context.Background()
		db.MustExec(`INSERT INTO jobs (task, queue, run_at) SELECT 'emails.send', 'old', now() - interval '1 hour' FROM generate_series(1, 10)`)
		insertJobs(t, db, 6, "new", "emails.send", dlq.StateAvailable)
		insertJobs(t, db, 5, "charges", "payments.charge", dlq.StateAvailable)
		if _, err := st.Queue.SetThrottle(ctx, throttleParams("task", "payments.charge", 2, 0)); err != nil {
			t.Fatal(err)
		}
		c, err := st.Queue.ClaimThrottled(ctx, "w1", []string{"old", "new", "charges"}, nil, 10, time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		// The 10 oldest are old's: new's 6 and the charges' 2 (the room)
		// were read and left past the limit, and 3 charges dropped.
		if len(c.Jobs) != 10 || len(c.Exhausted) != 0 {
			t.Fatalf("claimed %d, exhausted %v, want 10 and no queue read to its end", len(c.Jobs), c.Exhausted)
		}
		c, err = st.Queue.ClaimThrottled(ctx, "w1", []string{"new", "charges"}, nil, 10, time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		// new's 6 and 2 charges taken, 3 charges dropped past the room.
		_, newDone := c.Exhausted["new"]
		_, chargesDone := c.Exhausted["charges"]
		if len(c.Jobs) != 8 || !newDone || chargesDone {
			t.Fatalf("claimed %d, exhausted %v, want 8 and only new read to its end", len(c.Jobs), c.Exhausted)
		}
		// Full now: every charge is held, left out of the walk, which
		// reads the queue to its end.
		c, err = st.Queue.ClaimThrottled(ctx, "w1", []string{"charges"}, nil, 10, time.Minute, false)
		if _, chargesDone := c.Exhausted["charges"]; err != nil || len(c.Jobs) != 0 || !chargesDone {
			t.Fatalf("claimed %d, exhausted %v (%v), want none and the charges read to their end", len(c.Jobs), c.Exhausted, err)
		}
	})

	t.Run("ExpiryEndsItAndIsRecordedOnce", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 5, "default", "payments.charge", dlq.StateAvailable)
		p := throttleParams("task", "payments.charge", 1, 0)
		until := time.Now().Add(1100 * time.Millisecond)
		p.Until = &until
		if _, err := st.Queue.SetThrottle(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		if got, _ := claimTasks(t, st, "w1", 100); got["payments.charge"] != 1 {
			t.Fatalf("claim under the throttle took %v, want 1", got)
		}
		time.Sleep(time.Until(until) + 100*time.Millisecond)
		if got, c := claimTasks(t, st, "w1", 100); got["payments.charge"] != 4 || c.Throttled {
			t.Fatalf("claim after the expiry took %v (throttled %v), want the other 4, not throttled", got, c.Throttled)
		}
		for range 2 {
			if _, err := st.Queue.ExpireThrottles(context.Background(), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM audit_events WHERE action = 'throttle_expired'`); err != nil || n != 1 {
			t.Fatalf("%d expiry entries (%v), want 1", n, err)
		}
	})
}

// TestClaimCostOfThrottles measures what a throttle costs the claim, as
// TestClaimCostOfPauses does for pauses: 100,000 jobs of the throttled
// task due ahead of 1,000 others, 50 of its jobs running.
// docs/performance.md quotes the figures this logs.
func TestClaimCostOfThrottles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	const throttled, others, limit = 100_000, 1_000, 100
	db.MustExec(`INSERT INTO jobs (task, queue, run_at)
		SELECT 'payments.charge', 'default', now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, $1) i`, throttled)
	db.MustExec(`INSERT INTO jobs (task, queue, run_at)
		SELECT 'emails.send', 'default', now() - interval '10 minutes' + i * interval '1 ms' FROM generate_series(1, $1) i`, others)
	db.MustExec(`UPDATE jobs SET state = 'running', lease_owner = 'w', lease_expires_at = now() + interval '1 hour', attempt = 1
		WHERE id IN (SELECT id FROM jobs WHERE task = 'payments.charge' ORDER BY id LIMIT 50)`)
	db.MustExec(`VACUUM ANALYZE jobs`)
	queues := []string{"default"}

	base := pausedClaimCost(t, db, queues, limit)
	t.Logf("no throttle: walked %.0f rows, %.0f buffers, %.2f ms", base.walked, base.buffers, base.ms)

	// With room, the walk takes the throttled task's jobs itself, up to
	// the room, and drops the rest it read: the limit's rows, whatever the
	// backlog behind them.
	db.MustExec(`INSERT INTO throttles (kind, name, max_running, reason, set_by) VALUES ('task', 'payments.charge', 60, 'test', 'plan-test')`)
	// The claim that does not honour throttles, run by a worker whose last
	// claim found none open, takes nothing once one is: it reads no job and
	// returns the marker, and ClaimThrottled runs the throttled claim.
	if plain := explainClaim(t, db, queues, nil, limit); plain.walked != 0 || plain.claimed != 1 {
		t.Errorf("with a throttle open the plain claim walked %.0f rows and returned %d, want none and the marker", plain.walked, plain.claimed)
	}
	room := throttledClaimCost(t, db, queues, nil, limit)
	t.Logf("task payments.charge throttled to 60 running, 50 running (%d of its jobs due ahead of %d others): walked %.0f rows, %.0f buffers, %.2f ms",
		throttled, others, room.walked, room.buffers, room.ms)
	if room.walked > limit+1 {
		t.Errorf("with room the claim walked %.0f rows, want at most the limit (%d)", room.walked, limit+1)
	}
	// Its room of 10, and the marker.
	if room.claimed != 10+1 {
		t.Errorf("with room the claim returned %d rows, want the room (10) and the marker", room.claimed)
	}

	// Full, the task is left out of the walk, which reads past its jobs
	// due ahead of the first it may take: from the head, O(its backlog).
	// The worker walks from the head once a poll interval; its other
	// claims walk on after its positions, past the held jobs: the limit's
	// rows again.
	db.MustExec(`UPDATE throttles SET max_running = 50`)
	head := throttledClaimCost(t, db, queues, nil, limit)
	var last dlq.Job
	if err := db.GetContext(ctx, &last, `SELECT id, run_at FROM jobs WHERE task = 'emails.send' ORDER BY run_at, id OFFSET $1 LIMIT 1`, limit-1); err != nil {
		t.Fatal(err)
	}
	after := throttledClaimCost(t, db, queues, map[string]dlq.Position{"default": dlq.PositionOf(last)}, limit)
	t.Logf("the same throttle full (50 of 50 running): from the head walked %.0f rows, %.0f buffers, %.2f ms; after the last claimed job %.0f rows, %.0f buffers, %.2f ms",
		head.walked, head.buffers, head.ms, after.walked, after.buffers, after.ms)
	if head.walked < throttled || head.claimed != limit+1 {
		t.Errorf("full, the claim from the head walked %.0f rows and returned %d, want past the %d held and the limit's others (%d, and the marker)",
			head.walked, head.claimed, throttled, limit)
	}
	if after.walked > limit+1 || after.claimed != limit+1 {
		t.Errorf("full, the claim after the last claimed job walked %.0f rows and returned %d, want the limit's (%d, and the marker)", after.walked, after.claimed, limit)
	}

	// A queue holding nothing but held jobs is read to its end once: the
	// claim says so (Exhausted, with its time), and a walk after that
	// reads nothing.
	db.MustExec(`INSERT INTO jobs (task, queue, run_at)
		SELECT 'payments.charge', 'charges', now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, $1) i`, others)
	db.MustExec(`ANALYZE jobs`)
	st := storetest.NewStores(db.DB)
	c, err := st.Queue.ClaimThrottled(ctx, "w1", []string{"charges"}, nil, limit, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	at, ok := c.Exhausted["charges"]
	if len(c.Jobs) != 0 || !c.Throttled || !ok {
		t.Fatalf("a claim of the held queue took %d jobs, throttled %v, exhausted %v: want none, throttled, the queue read to its end",
			len(c.Jobs), c.Throttled, c.Exhausted)
	}
	held := throttledClaimCost(t, db, []string{"charges"}, map[string]dlq.Position{"charges": {RunAt: at, ID: math.MaxInt64}}, limit)
	t.Logf("a queue of %d held jobs, after the time its last claim read it to: walked %.0f rows, %.2f ms", others, held.walked, held.ms)
	if held.walked > 0 {
		t.Errorf("after the time a claim read the held queue to, the walk read %.0f rows, want none", held.walked)
	}
	// A claim that reads only part of a queue does not say it read it all.
	db.MustExec(`DELETE FROM throttles`)
	if c, err := st.Queue.ClaimThrottled(ctx, "w1", []string{"charges"}, nil, 10, time.Minute, false); err != nil || len(c.Exhausted) != 0 {
		t.Fatalf("a claim with no throttle open said it exhausted %v (%v)", c.Exhausted, err)
	}

	// A queue's throttle leaves the main walk before it starts, and its
	// own walk reads its room: no walk past the queue's backlog.
	db.MustExec(`INSERT INTO throttles (kind, name, max_running, reason, set_by) VALUES ('queue', 'default', 60, 'test', 'plan-test')`)
	q := throttledClaimCost(t, db, queues, nil, limit)
	t.Logf("queue default throttled to 60 running, 50 running (%d jobs in it): walked %.0f rows, %.0f buffers, %.2f ms",
		throttled+others, q.walked, q.buffers, q.ms)
	if q.walked > 10+1 || q.claimed != 10+1 {
		t.Errorf("a throttled queue's claim walked %.0f rows and claimed %d, want its room of 10 (and the marker)", q.walked, q.claimed)
	}
}

// throttledClaimCost is the fastest of three EXPLAINs of the claim that
// honours throttles, each in a transaction it rolls back.
func throttledClaimCost(t *testing.T, db *storetest.DB, queues []string, after map[string]dlq.Position, limit int) claimCost {
	t.Helper()
	query, args := queue.ThrottledClaimQuery(queues, after, limit)
	return fastestOfThree(func() claimCost { return explainClaimQuery(t, db, query, args) })
}
