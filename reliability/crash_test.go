package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestCrash SIGKILLs a random one of three worker processes about every
// second, and restarts it, while they run a few thousand jobs whose effect
// is guarded by ProcessOnce and a version. Afterwards every job has
// succeeded, every effect was applied exactly once, and every account holds
// its newest version: at-least-once delivery plus ProcessOnce is exactly
// once, and the version guard keeps late redeliveries from going back in
// time.
func TestCrash(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	setupEffects(t, db.DB)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	jobs, accounts := size(2000, 8000), 50
	maxVersion := map[int]int{}
	for from := 0; from < jobs; from += dlq.MaxBatch {
		var batch []dlq.EnqueueParams
		for i := from; i < min(jobs, from+dlq.MaxBatch); i++ {
			a := effectArgs{Event: fmt.Sprintf("crash-%d", i), Account: i % accounts, Version: i/accounts + 1, MS: 20 + i%30}
			maxVersion[a.Account] = max(maxVersion[a.Account], a.Version)
			kw, _ := json.Marshal(a)
			// Attempts to spare: a job may be under several kills in a row.
			batch = append(batch, dlq.EnqueueParams{Task: taskEffect, Kwargs: kw, MaxAttempts: 50})
		}
		if _, err := store.Queue.EnqueueMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}

	f := newFleet(t, db.DSN, childOpts{Concurrency: 4, Lease: time.Second, Grace: time.Second})
	workers := []string{"crash-w1", "crash-w2", "crash-w3"}
	for _, id := range workers {
		f.start(id)
	}
	start := time.Now()
	deadline := start.Add(size(2*time.Minute, 10*time.Minute))
	kills := 0
	rng := rand.New(rand.NewPCG(1, 2))
	next := time.Now().Add(size(600*time.Millisecond, time.Second))
	// Each look, until every job has finished, kills a worker (and starts
	// it again) once the next kill is due.
	finished := false
	defer func() {
		if !finished {
			t.Logf("%d kills in %s", kills, time.Since(start).Round(time.Second))
		}
	}()
	waitFor(t, time.Until(deadline), "every job to finish under the kills", func() bool {
		if count(db.DB, `SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'dead')`) == 0 {
			return true
		}
		if time.Now().After(next) {
			id := workers[rng.IntN(len(workers))]
			f.kill(id)
			f.start(id)
			kills++
			next = time.Now().Add(size(400*time.Millisecond, 700*time.Millisecond) + time.Duration(rng.IntN(600))*time.Millisecond)
		}
		return false
	})
	finished = true
	elapsed := time.Since(start)

	if n := mustCount(t, db.DB, `SELECT count(*) FROM jobs WHERE state <> 'succeeded'`); n != 0 {
		t.Errorf("%d jobs did not succeed", n)
	}
	deliveries, suppressed := effectsOnce(t, db.DB, jobs)
	var rows []struct{ ID, Version int }
	if err := db.Select(&rows, `SELECT id, version FROM rel_accounts`); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, r := range rows {
		if r.Version != maxVersion[r.ID] {
			stale++
		}
	}
	if stale != 0 || len(rows) != accounts {
		t.Errorf("%d of %d accounts hold an older version than their newest event", stale, len(rows))
	}
	if kills < 3 {
		t.Errorf("only %d kills: the run was too short to test anything", kills)
	}
	if t.Failed() {
		return
	}
	figures(t, "crash", "%d jobs, 3 workers, %d SIGKILLs in %s; %d redeliveries, %d duplicates suppressed by ProcessOnce, 0 effects doubled or lost, 0 stale versions",
		jobs, kills, elapsed.Round(time.Second), deliveries-jobs, suppressed)
}
