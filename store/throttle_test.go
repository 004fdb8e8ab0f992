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

// testTasks are the tasks the tests' workers run.
var testTasks = []string{"payments.charge", "emails.send"}

// renewRooms renews worker's grants of the throttles touching queues, as a
// worker does, and returns its rooms: each grant's slots less the jobs of
// it the worker has running (the worker counts them itself; here the
// database does), and whole starts of its share of the rate (a bucket
// the worker keeps; here a second's worth).
func renewRooms(t *testing.T, db *storetest.DB, st *storetest.Stores, worker string, queues ...string) []queue.Room {
	t.Helper()
	grants, err := st.Queue.RenewGrants(context.Background(), worker, queues, testTasks, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rooms := make([]queue.Room, len(grants))
	for i, g := range grants {
		room := math.MaxInt32
		if g.Slots != nil {
			var running int
			if err := db.Get(&running, `SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner = $1
				AND CASE WHEN $2 = 'task' THEN task = $3 ELSE queue = $3 END`, worker, g.Kind, g.Name); err != nil {
				t.Fatal(err)
			}
			room = max(0, *g.Slots-running)
		}
		if g.PerSecond != nil {
			room = min(room, int(max(1, *g.PerSecond)))
		}
		rooms[i] = queue.Room{ThrottleID: g.ThrottleID, Revision: g.Revision, Room: room}
	}
	return rooms
}

// claimTasks renews worker's grants, claims up to limit jobs of the
// default queue within them and counts them by task.
func claimTasks(t *testing.T, db *storetest.DB, st *storetest.Stores, worker string, limit int) (map[string]int, dlq.Claim) {
	t.Helper()
	return claimWithin(t, st, worker, limit, renewRooms(t, db, st, worker, "default"))
}

// claimWithin claims up to limit jobs of the default queue within rooms
// and counts them by task.
func claimWithin(t *testing.T, st *storetest.Stores, worker string, limit int, rooms []queue.Room) (map[string]int, dlq.Claim) {
	t.Helper()
	c, err := st.Queue.ClaimGranted(context.Background(), worker, []string{"default"}, nil, limit, time.Minute, rooms)
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

	// The claim takes at most the worker's grant of a throttled task's
	// jobs, and the rest of the queue as usual; a second worker gets its
	// share as the first renews and shrinks to its own.
	t.Run("ClaimKeepsTheTaskWithinItsRunningLimit", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 10, "default", "payments.charge", dlq.StateAvailable)
		insertJobs(t, db, 5, "default", "emails.send", dlq.StateAvailable)
		if _, err := st.Queue.SetThrottle(context.Background(), throttleParams("task", "payments.charge", 3, 0)); err != nil {
			t.Fatal(err)
		}
		got, c := claimTasks(t, db, st, "w1", 100)
		if got["payments.charge"] != 3 || got["emails.send"] != 5 || !c.Throttled || c.Ungranted {
			t.Fatalf("first claim took %v (throttled %v, ungranted %v), want 3 payments.charge, 5 emails.send, throttled, granted",
				got, c.Throttled, c.Ungranted)
		}
		if got, _ := claimTasks(t, db, st, "w2", 100); len(got) != 0 {
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
		// w1's grant of 3 stands until it renews: w2 still has none.
		if got, _ := claimTasks(t, db, st, "w2", 100); len(got) != 0 {
			t.Fatalf("with w1's grant of 3 standing, w2 took %v", got)
		}
		// w1 renews to its fair part (2 of 3, the first of two workers),
		// and runs 2: w2's renewal gets the third slot.
		if rooms := renewRooms(t, db, st, "w1", "default"); len(rooms) != 1 || rooms[0].Room != 0 {
			t.Fatalf("w1 renewed to rooms %+v, want its 2 slots, both running", rooms)
		}
		if got, _ := claimTasks(t, db, st, "w2", 100); got["payments.charge"] != 1 {
			t.Fatalf("after one finished and w1 renewed, w2 took %v, want 1 payments.charge", got)
		}
		if got, _ := claimTasks(t, db, st, "w1", 100); len(got) != 0 {
			t.Fatalf("with 3 running, w1 took %v", got)
		}
	})

	// A claim takes nothing of a throttle it holds no grant of, and says
	// so; the rest of the queue it takes as usual.
	t.Run("UngrantedThrottleHoldsItsJobs", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 3, "default", "payments.charge", dlq.StateAvailable)
		insertJobs(t, db, 2, "default", "emails.send", dlq.StateAvailable)
		if _, err := st.Queue.SetThrottle(context.Background(), throttleParams("task", "payments.charge", 10, 0)); err != nil {
			t.Fatal(err)
		}
		got, c := claimWithin(t, st, "w1", 100, nil)
		if got["payments.charge"] != 0 || got["emails.send"] != 2 || !c.Ungranted {
			t.Fatalf("a claim without a grant took %v (ungranted %v), want the 2 emails.send only, and ungranted", got, c.Ungranted)
		}
		// With a grant whose room is past the limit, the plain claim: no
		// throttle marker at all.
		got, c = claimTasks(t, db, st, "w1", 2)
		if got["payments.charge"] != 2 || c.Throttled || c.Ungranted {
			t.Fatalf("a claim of 2 within a room of 10 took %v (throttled %v, ungranted %v), want 2, neither", got, c.Throttled, c.Ungranted)
		}
	})

	// A change voids every grant of the throttle from its commit: a claim
	// with a grant of the old limits takes none of its jobs, and the
	// renewal grants the new ones, counting what runs.
	t.Run("ChangeVoidsTheGrants", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		ctx := context.Background()
		insertJobs(t, db, 10, "default", "payments.charge", dlq.StateAvailable)
		res, err := st.Queue.SetThrottle(ctx, throttleParams("task", "payments.charge", 6, 0))
		if err != nil {
			t.Fatal(err)
		}
		rooms := renewRooms(t, db, st, "w1", "default")
		if got, _ := claimWithin(t, st, "w1", 2, rooms); got["payments.charge"] != 2 {
			t.Fatalf("first claim took %v, want 2", got)
		}
		change := throttleParams("", "", 3, 0)
		change.ID = res.Throttle.ID
		if _, err := st.Queue.SetThrottle(ctx, change); err != nil {
			t.Fatal(err)
		}
		// The old grant had room for 4 more.
		if got, c := claimWithin(t, st, "w1", 100, rooms); len(got) != 0 || !c.Ungranted {
			t.Fatalf("a claim with the grant of before the change took %v (ungranted %v), want nothing, ungranted", got, c.Ungranted)
		}
		if got, _ := claimTasks(t, db, st, "w1", 100); got["payments.charge"] != 1 {
			t.Fatalf("after renewing, the claim took %v, want 1 (3 less the 2 running)", got)
		}
	})

	// Shares are fair among the workers that want the throttle, within
	// its limits, and count the running jobs of workers without a grant.
	t.Run("SharesAreFairAndExact", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		ctx := context.Background()
		if _, err := st.Queue.SetThrottle(ctx, throttleParams("task", "payments.charge", 7, 2.5)); err != nil {
			t.Fatal(err)
		}
		shares := func() (slots []int, rates []float64) {
			for _, w := range []string{"w1", "w2", "w3"} {
				g, err := st.Queue.RenewGrants(ctx, w, []string{"default"}, testTasks, time.Minute)
				if err != nil || len(g) != 1 {
					t.Fatalf("%s's grants: %+v (%v)", w, g, err)
				}
				slots, rates = append(slots, *g[0].Slots), append(rates, *g[0].PerSecond)
			}
			return slots, rates
		}
		// w1 first takes 7 and the rate's whole 2.5; each renewal after
		// brings the shares nearer the fair ones.
		shares()
		shares()
		slots, rates := shares()
		if slots[0] != 3 || slots[1] != 2 || slots[2] != 2 {
			t.Errorf("slots %v after three rounds, want 3, 2, 2", slots)
		}
		// At most floor(2.5) = 2 workers share the rate, each at least one
		// start a second.
		if rates[0] != 1.25 || rates[1] != 1.25 || rates[2] != 0 {
			t.Errorf("rates %v after three rounds, want 1.25, 1.25, 0", rates)
		}
		// A dead worker's 4 running jobs count until they are rescued:
		// of 7, the three live workers share 3.
		db.MustExec(`INSERT INTO jobs (task, queue, state, attempt, lease_owner, lease_expires_at)
			SELECT 'payments.charge', 'default', 'running', 1, 'dead', now() + interval '1 minute' FROM generate_series(1, 4)`)
		shares()
		slots, _ = shares()
		if sum := slots[0] + slots[1] + slots[2]; sum != 3 {
			t.Errorf("slots %v with 4 held by a dead worker, want 3 in all", slots)
		}
		// A worker that does not run the task gets no share of it, and
		// takes none from the others.
		g, err := st.Queue.RenewGrants(ctx, "w4", []string{"default"}, []string{"emails.send"}, time.Minute)
		if err != nil || len(g) != 1 || *g[0].Slots != 0 || *g[0].PerSecond != 0 {
			t.Fatalf("a worker without the task was granted %+v (%v), want a zero share", g, err)
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM throttle_grants WHERE worker = 'w4'`); err != nil || n != 0 {
			t.Fatalf("%d grants of the worker without the task (%v), want none written", n, err)
		}
	})

	// A queue's throttle caps the queue. The claim locks no throttle: with
	// the row held elsewhere it still takes its room, while a renewal
	// waits for the lock.
	t.Run("QueueThrottleAndAHeldThrottle", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		insertJobs(t, db, 10, "default", "emails.send", dlq.StateAvailable)
		res, err := st.Queue.SetThrottle(context.Background(), throttleParams("queue", "default", 4, 0))
		if err != nil {
			t.Fatal(err)
		}
		rooms := renewRooms(t, db, st, "w1", "default")
		tx := db.MustBegin()
		defer tx.Rollback()
		tx.MustExec(`SELECT 1 FROM throttles WHERE id = $1 FOR UPDATE`, res.Throttle.ID)
		if got, c := claimWithin(t, st, "w1", 100, rooms); got["emails.send"] != 4 || !c.Throttled {
			t.Fatalf("with the throttle held elsewhere the claim took %v (throttled %v), want the queue's 4, throttled", got, c.Throttled)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := st.Queue.RenewGrants(ctx, "w1", []string{"default"}, testTasks, time.Minute); err == nil {
			t.Fatal("a renewal went through while the throttle was held elsewhere, want it to wait")
		}
		_ = tx.Rollback()
		if got, _ := claimTasks(t, db, st, "w1", 100); len(got) != 0 {
			t.Fatalf("with 4 of the queue's 4 running the claim took %v", got)
		}
	})

	// The start rate goes to one worker when it is below one start a
	// second: each worker's bucket holds one start at least, so two
	// shares would burst twice the throttle's one.
	t.Run("ASlowRateHasOneHolder", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		st := storetest.NewStores(db.DB)
		ctx := context.Background()
		if _, err := st.Queue.SetThrottle(ctx, throttleParams("task", "payments.charge", 0, 0.5)); err != nil {
			t.Fatal(err)
		}
		var rates []float64
		for _, w := range []string{"w1", "w2"} {
			g, err := st.Queue.RenewGrants(ctx, w, []string{"default"}, testTasks, time.Minute)
			if err != nil || len(g) != 1 || g[0].Slots != nil {
				t.Fatalf("%s's grants: %+v (%v), want one, of no slots", w, g, err)
			}
			rates = append(rates, *g[0].PerSecond)
		}
		if rates[0] != 0.5 || rates[1] != 0 {
			t.Fatalf("rates %v, want 0.5 for the first, none for the second", rates)
		}
		// Once the first gives its grant up, the second gets the rate.
		if err := st.Queue.DropGrants(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if g, err := st.Queue.RenewGrants(ctx, "w2", []string{"default"}, testTasks, time.Minute); err != nil || *g[0].PerSecond != 0.5 {
			t.Fatalf("w2's grant after w1 left: %+v (%v), want 0.5", g, err)
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
		rooms := renewRooms(t, db, st, "w1", "old", "new", "charges")
		c, err := st.Queue.ClaimGranted(ctx, "w1", []string{"old", "new", "charges"}, nil, 10, time.Minute, rooms)
		if err != nil {
			t.Fatal(err)
		}
		// The 10 oldest are old's: new's 6 and the charges' 2 (the room)
		// were read and left past the limit, and 3 charges dropped.
		if len(c.Jobs) != 10 || len(c.Exhausted) != 0 {
			t.Fatalf("claimed %d, exhausted %v, want 10 and no queue read to its end", len(c.Jobs), c.Exhausted)
		}
		c, err = st.Queue.ClaimGranted(ctx, "w1", []string{"new", "charges"}, nil, 10, time.Minute, renewRooms(t, db, st, "w1", "new", "charges"))
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
		c, err = st.Queue.ClaimGranted(ctx, "w1", []string{"charges"}, nil, 10, time.Minute, renewRooms(t, db, st, "w1", "charges"))
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
		if got, _ := claimTasks(t, db, st, "w1", 100); got["payments.charge"] != 1 {
			t.Fatalf("claim under the throttle took %v, want 1", got)
		}
		time.Sleep(time.Until(until) + 100*time.Millisecond)
		if got, c := claimWithin(t, st, "w1", 100, nil); got["payments.charge"] != 4 || c.Throttled {
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

	var id int64
	if err := db.Get(&id, `INSERT INTO throttles (kind, name, max_running, reason, set_by)
		VALUES ('task', 'payments.charge', 60, 'test', 'plan-test') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	granted := func(room int) queue.Room { return queue.Room{ThrottleID: id, Revision: 1, Room: room} }
	// The plain claim of a worker without a grant of the throttle takes
	// nothing: it reads no job and returns the marker, and ClaimGranted
	// runs the throttled claim.
	if plain := explainClaim(t, db, queues, nil, limit); plain.walked != 0 || plain.claimed != 1 {
		t.Errorf("with a throttle open and no grant the plain claim walked %.0f rows and returned %d, want none and the marker", plain.walked, plain.claimed)
	}
	// With a grant whose room is at least the limit, the plain claim
	// walks as it does with no throttle: what the throttle costs is its
	// look at the throttles table.
	query, args := queue.ClaimQuery(queues, nil, limit, granted(limit))
	plain := fastestOfThree(func() claimCost { return explainClaimQuery(t, db, query, args) })
	t.Logf("task payments.charge throttled, granted a room of at least the limit (plain claim): walked %.0f rows, %.0f buffers, %.2f ms",
		plain.walked, plain.buffers, plain.ms)
	if plain.walked > limit+1 || plain.claimed != limit {
		t.Errorf("granted a room of the limit the plain claim walked %.0f rows and returned %d, want the limit (%d) and no marker", plain.walked, plain.claimed, limit)
	}

	// With less room than the limit, the walk takes the throttled task's
	// jobs itself, up to the room, and drops the rest it read: the
	// limit's rows, whatever the backlog behind them.
	room := throttledClaimCost(t, db, queues, nil, limit, granted(10))
	t.Logf("task payments.charge throttled, a room of 10 (%d of its jobs due ahead of %d others): walked %.0f rows, %.0f buffers, %.2f ms",
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
	head := throttledClaimCost(t, db, queues, nil, limit, granted(0))
	var last dlq.Job
	if err := db.GetContext(ctx, &last, `SELECT id, run_at FROM jobs WHERE task = 'emails.send' ORDER BY run_at, id OFFSET $1 LIMIT 1`, limit-1); err != nil {
		t.Fatal(err)
	}
	after := throttledClaimCost(t, db, queues, map[string]dlq.Position{"default": dlq.PositionOf(last)}, limit, granted(0))
	t.Logf("the same throttle with no room: from the head walked %.0f rows, %.0f buffers, %.2f ms; after the last claimed job %.0f rows, %.0f buffers, %.2f ms",
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
	c, err := st.Queue.ClaimGranted(ctx, "w1", []string{"charges"}, nil, limit, time.Minute, []queue.Room{granted(0)})
	if err != nil {
		t.Fatal(err)
	}
	at, ok := c.Exhausted["charges"]
	if len(c.Jobs) != 0 || !c.Throttled || !ok {
		t.Fatalf("a claim of the held queue took %d jobs, throttled %v, exhausted %v: want none, throttled, the queue read to its end",
			len(c.Jobs), c.Throttled, c.Exhausted)
	}
	held := throttledClaimCost(t, db, []string{"charges"}, map[string]dlq.Position{"charges": {RunAt: at, ID: math.MaxInt64}}, limit, granted(0))
	t.Logf("a queue of %d held jobs, after the time its last claim read it to: walked %.0f rows, %.2f ms", others, held.walked, held.ms)
	if held.walked > 0 {
		t.Errorf("after the time a claim read the held queue to, the walk read %.0f rows, want none", held.walked)
	}
	// A claim that reads only part of a queue does not say it read it all.
	db.MustExec(`DELETE FROM throttles`)
	if c, err := st.Queue.ClaimGranted(ctx, "w1", []string{"charges"}, nil, 10, time.Minute, nil); err != nil || len(c.Exhausted) != 0 {
		t.Fatalf("a claim with no throttle open said it exhausted %v (%v)", c.Exhausted, err)
	}

	// A queue's throttle leaves the main walk before it starts, and its
	// own walk reads its room: no walk past the queue's backlog.
	if err := db.Get(&id, `INSERT INTO throttles (kind, name, max_running, reason, set_by)
		VALUES ('queue', 'default', 60, 'test', 'plan-test') RETURNING id`); err != nil {
		t.Fatal(err)
	}
	q := throttledClaimCost(t, db, queues, nil, limit, granted(10))
	t.Logf("queue default throttled, a room of 10 (%d jobs in it): walked %.0f rows, %.0f buffers, %.2f ms",
		throttled+others, q.walked, q.buffers, q.ms)
	if q.walked > 10+1 || q.claimed != 10+1 {
		t.Errorf("a throttled queue's claim walked %.0f rows and claimed %d, want its room of 10 (and the marker)", q.walked, q.claimed)
	}
}

// throttledClaimCost is the fastest of three EXPLAINs of the claim that
// honours throttles, each in a transaction it rolls back.
func throttledClaimCost(t *testing.T, db *storetest.DB, queues []string, after map[string]dlq.Position, limit int, rooms ...queue.Room) claimCost {
	t.Helper()
	query, args := queue.ThrottledClaimQuery(queues, after, limit, rooms...)
	return fastestOfThree(func() claimCost { return explainClaimQuery(t, db, query, args) })
}
