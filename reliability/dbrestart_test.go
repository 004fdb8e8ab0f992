package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// TestDatabaseRestart restarts Postgres, in fast and in immediate mode,
// while three workers run jobs and an operator's bulk replay is under way.
// While it is down, pages and the API answer 503 database_unavailable. Once
// it is back everything recovers by itself: every job succeeds, each effect
// exactly once, every letter is replayed exactly once, the operation
// finishes, and no job is misjudged: no dead letter at all, in particular
// none with reason lease_expired while its worker was alive and beating.
func TestDatabaseRestart(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPrivate(t)
	db := pg.DB.DB
	setupEffects(t, db)
	store := storetest.NewStores(db)
	ctx := context.Background()
	jobs, letters := size(1500, 6000), size(1000, 5000)
	seedEffectLetters(t, db, letters, "letter-")
	for from := 0; from < jobs; from += dlq.MaxBatch {
		var batch []dlq.EnqueueParams
		for i := from; i < min(jobs, from+dlq.MaxBatch); i++ {
			kw, _ := json.Marshal(effectArgs{Event: fmt.Sprintf("job-%d", i), Account: i, Version: 1, MS: 10 + i%20})
			batch = append(batch, dlq.EnqueueParams{Task: taskEffect, Kwargs: kw, MaxAttempts: 25})
		}
		if _, err := store.Queue.EnqueueMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Its own pool, as a console process has.
	consoleDB, err := postgres.Open(ctx, pg.DB.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consoleDB.Close() })
	c := startConsole(t, consoleDB)
	f := newFleet(t, pg.DB.DSN, childOpts{Concurrency: 4, Lease: 5 * time.Second, Grace: 2 * time.Second})
	for _, id := range []string{"restart-w1", "restart-w2", "restart-w3"} {
		f.start(id)
	}
	// Paced so that the replay is still running across the restarts.
	rate := float64(letters) / size(6.0, 20.0)
	res := c.do("POST", "/api/v1/dead-letters/replay",
		fmt.Sprintf(`{"filter":{"task":%q},"reason":"reliability: replay across a database restart","rate_per_second":%g,"wait_seconds":0}`, taskEffect, rate))
	if res.err != nil || res.status >= 300 {
		t.Fatalf("start bulk replay: %s", res)
	}
	var op struct {
		OperationID int64 `json:"operation_id"`
	}
	if err := json.Unmarshal(res.body, &op); err != nil || op.OperationID == 0 {
		t.Fatalf("bulk replay answer %s: %v", res, err)
	}

	modes := []string{"fast", "immediate"}
	if *long {
		modes = []string{"fast", "immediate", "fast", "immediate", "fast", "immediate"}
	}
	var outage, unavailable503 int
	var downFor time.Duration
	for _, mode := range modes {
		// Each outage hits a system at work: since the last restart the
		// workers have finished jobs, the replay's among them (unless
		// there are no more to finish).
		const succeeded = `SELECT count(*) FROM jobs WHERE state = 'succeeded'`
		const replays = succeeded + ` AND replay_of IS NOT NULL`
		done, replayed := count(db, succeeded), count(db, replays)
		waitFor(t, size(2*time.Minute, 6*time.Minute), "the workers and the replay to make progress before the "+mode+" stop", func() bool {
			return count(db, succeeded) >= min(done+100, jobs+letters) && count(db, replays) >= min(replayed+1, letters)
		})
		stopped := time.Now()
		var err error
		if mode == "fast" {
			err = pg.Stop()
		} else {
			err = pg.StopImmediate()
		}
		if err != nil {
			t.Fatalf("stop (%s): %v", mode, err)
		}
		outage++
		for _, path := range []string{"/api/v1/dead-letters", "/api/v1/jobs/1", "/dead-letters", "/"} {
			r := c.do("GET", path, "")
			ok := r.err == nil && r.status == 503 && r.header.Get("Retry-After") != ""
			if strings.HasPrefix(path, "/api/") {
				ok = ok && strings.Contains(string(r.body), `"database_unavailable"`)
			} else {
				ok = ok && strings.Contains(string(r.body), "database is unreachable")
			}
			if !ok {
				t.Errorf("GET %s with the database down (%s stop): %.300s; want 503 database_unavailable with Retry-After", path, mode, r)
			}
			unavailable503++
		}
		r := c.do("POST", "/api/v1/jobs/batch", fmt.Sprintf(`{"jobs":[{"task":%q,"kwargs":{"event":"x"}}]}`, taskNoop))
		if r.status != 503 {
			t.Errorf("batch enqueue with the database down: %.300s; want 503", r)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = pg.Restart(rctx)
		cancel()
		if err != nil {
			t.Fatalf("restart after %s stop: %v", mode, err)
		}
		downFor += time.Since(stopped)
	}
	recovering := time.Now()
	waitFor(t, size(2*time.Minute, 6*time.Minute), "every job to finish and the replay to complete", func() bool {
		return count(db, `SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'dead')`) == 0 &&
			count(db, `SELECT count(*) FROM operations WHERE id = $1 AND state IN ('done', 'cancelled', 'failed')`, op.OperationID) == 1 &&
			count(db, `SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'dead')`) == 0 // replayed jobs included
	})
	recovered := time.Since(recovering)

	var state string
	if err := db.Get(&state, `SELECT state FROM operations WHERE id = $1`, op.OperationID); err != nil || state != "done" {
		t.Errorf("bulk replay ended %q (%v), want done: it must resume by itself after the restarts", state, err)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM dead_letters WHERE status <> 'replayed'`); n != 0 {
		t.Errorf("%d dead letters: none of the seeded letters may stay pending, and no job may be dead-lettered", n)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM dead_letters WHERE reason = 'lease_expired' AND failed_at > now() - interval '1 hour'`); n != 0 {
		t.Errorf("%d jobs misjudged as lease_expired while their workers were alive", n)
	}
	// Every worker stayed alive and kept heartbeating (or, while the
	// database was down, would have): a lease the rescuer took from one
	// of them is a job misjudged, letter or not.
	if n := mustCount(t, db, `SELECT count(*) FROM jobs, jsonb_array_elements(errors) e WHERE e->>'outcome' = 'lease_expired'`); n != 0 {
		t.Errorf("%d attempts recorded as lease_expired, though no worker died", n)
		var example string
		_ = db.Get(&example, `SELECT errors::text FROM jobs WHERE errors @> '[{"outcome": "lease_expired"}]' LIMIT 1`)
		t.Logf("for example: %s", example)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM (SELECT replay_of FROM jobs WHERE replay_of IS NOT NULL GROUP BY replay_of HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d letters replayed into more than one job", n)
	}
	if n := mustCount(t, db, `SELECT count(*) FROM jobs WHERE state <> 'succeeded'`); n != 0 {
		t.Errorf("%d jobs did not succeed", n)
	}
	deliveries, suppressed := effectsOnce(t, db, jobs+letters)
	for _, id := range []string{"restart-w1", "restart-w2", "restart-w3"} {
		if done, err := f.exited(id); done {
			t.Errorf("worker %s exited during the outage (%v): it must wait for the database", id, err)
		}
	}
	if t.Failed() {
		return
	}
	figures(t, "database restart", "%d jobs and a bulk replay of %d letters across %d restarts (%s), down %s in all; %d answers during outages, all 503 database_unavailable; recovered %s after the last; %d redeliveries, %d duplicates suppressed, 0 lost, 0 doubled, 0 misjudged",
		jobs, letters, outage, strings.Join(modes, ", "), downFor.Round(100*time.Millisecond), unavailable503+outage,
		recovered.Round(100*time.Millisecond), deliveries-jobs-letters, suppressed)
}
