package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/worker"
)

func TestCleaner(t *testing.T) {
	t.Parallel()

	// The jobs a cleaner meets: finished long ago or not, replays, dead
	// jobs with letters, and work still to run.
	seed := func(t *testing.T, b *bundle) map[string]int64 {
		t.Helper()
		ids := map[string]int64{}
		// Each job was created a minute before it finished, as a worker
		// would have run it, unless created says otherwise.
		insertCreated := func(name, state, created, finished string, replayOf any) {
			var id int64
			err := b.db.Get(&id, `INSERT INTO jobs (task, state, created_at, finished_at, replay_of)
				VALUES ('test.task', $1, now() - $2::interval, now() - $3::interval, $4) RETURNING id`,
				state, created, finished, replayOf)
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = id
		}
		insert := func(name, state, finished string, replayOf any) {
			insertCreated(name, state, finished+" 1 minute", finished, replayOf)
		}
		insert("old", "succeeded", "25 hours", nil)
		// Scheduled for a month ahead, run an hour ago: too recent to go,
		// though it was created long before the cutoff.
		insertCreated("scheduled", "succeeded", "30 days", "1 hour", nil)
		insert("older", "succeeded", "30 days", nil)
		insert("recent", "succeeded", "1 hour", nil)
		insert("dead", "dead", "30 days", nil)
		var letter int64
		if err := b.db.Get(&letter, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class,
			error_message, attempts, max_attempts, reason, fingerprint, enqueued_at)
			VALUES ($1, 'default', 'test.task', '[]', '{}', 'E', 'boom', 1, 1, 'permanent', 'f', now())
			RETURNING id`, ids["dead"]); err != nil {
			t.Fatal(err)
		}
		insert("old-replay", "succeeded", "30 days", letter)
		var waiting int64
		if err := b.db.Get(&waiting, `INSERT INTO jobs (task, run_at) VALUES ('test.task', now() + interval '1 day') RETURNING id`); err != nil {
			t.Fatal(err)
		}
		ids["waiting"] = waiting
		return ids
	}
	left := func(t *testing.T, b *bundle, ids map[string]int64) map[string]bool {
		t.Helper()
		kept := map[string]bool{}
		for name, id := range ids {
			kept[name] = b.count(t, `SELECT count(*) FROM jobs WHERE id = $1`, id) == 1
		}
		return kept
	}

	t.Run("DeletesSucceededJobsPastTheDefaultRetentionAndNothingElse", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := seed(t, b)
		b.reg.Register("test.task", func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
		cfg := b.config("cleaner-1")
		cfg.CleanInterval = 50 * time.Millisecond // RetainSucceeded left at its default, 24h
		b.start(t, cfg)
		waitFor(t, 5*time.Second, "the cleaner to delete the old succeeded jobs", func() bool {
			kept := left(t, b, ids)
			return !kept["old"] && !kept["older"]
		})
		kept := left(t, b, ids)
		for _, name := range []string{"recent", "scheduled", "dead", "old-replay", "waiting"} {
			if !kept[name] {
				t.Errorf("the cleaner deleted the %s job; it must keep it", name)
			}
		}
	})

	t.Run("NegativeRetentionKeepsEverything", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := seed(t, b)
		b.reg.Register("test.task", func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
		cfg := b.config("cleaner-off")
		cfg.CleanInterval, cfg.RetainSucceeded = 20*time.Millisecond, -1
		r := b.start(t, cfg)
		// The cleaner's first pass, or its word that it makes none: a
		// cleaner that was on deletes at its first pass, at start.
		waitFor(t, 10*time.Second, "the cleaner's first pass", func() bool { return r.cleans.Load() >= 1 })
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		for name, kept := range left(t, b, ids) {
			if !kept {
				t.Errorf("retention off, yet the %s job was deleted", name)
			}
		}
	})

	t.Run("OneCleanerAtATime", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.db.MustExec(`INSERT INTO jobs (task, state, created_at, finished_at)
			SELECT 'test.task', 'succeeded', now() - interval '3 days', now() - interval '2 days' FROM generate_series(1, 25000)`)
		// Hold the cleaner's lock as another process's cleaner would: a
		// second cleaner is told it is busy and deletes nothing.
		tx := b.db.MustBegin()
		var got bool
		if err := tx.Get(&got, `SELECT pg_try_advisory_xact_lock($1)`, int64(0x7265647269766501)); err != nil || !got {
			t.Fatalf("take the cleaner's lock: %v %v", got, err)
		}
		n, busy, err := b.store.Queue.DeleteSucceeded(context.Background(), time.Now().Add(-24*time.Hour), 10_000)
		if err != nil || !busy || n != 0 {
			t.Fatalf("with the lock held elsewhere: deleted %d, busy %v, err %v; want 0, busy", n, busy, err)
		}
		_ = tx.Rollback()

		// Two cleaners at once, batch after batch: every row deleted once.
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for range 2 {
			wg.Go(func() {
				for {
					n, busy, err := b.store.Queue.DeleteSucceeded(context.Background(), time.Now().Add(-24*time.Hour), 1_000)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					total += n
					mu.Unlock()
					if !busy && n == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		if total != 25000 || b.count(t, `SELECT count(*) FROM jobs`) != 0 {
			t.Fatalf("two cleaners deleted %d of 25,000 jobs, %d left", total, b.count(t, `SELECT count(*) FROM jobs`))
		}
		kept, err := b.store.Queue.SucceededKept(context.Background())
		if err != nil || !kept.Oldest.IsZero() {
			t.Fatalf("after cleaning: %+v, %v; want no oldest job", kept, err)
		}
	})
}
