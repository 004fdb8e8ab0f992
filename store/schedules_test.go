package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// scheduleDef is a schedule of test.task every minute, first due at next.
func scheduleDef(name string, next time.Time) dlq.ScheduleDefinition {
	return dlq.ScheduleDefinition{Name: name, Every: time.Minute, Timezone: "UTC", Task: "test.task", Queue: "default",
		Args: []byte(`[]`), Kwargs: []byte(`{"report": "daily"}`), MaxAttempts: 3, NextRunAt: next}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

	t.Run("RacingWorkersEnqueueAnOccurrenceOnce", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		if _, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{scheduleDef("report", at)}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make(chan error, 8)
		taken := make(chan int64, 8)
		for range 8 {
			wg.Go(func() {
				o, err := store.Queue.EnqueueOccurrence(ctx, "report", at, at.Add(time.Minute))
				if o.Taken {
					taken <- o.JobID
				}
				results <- err
			})
		}
		wg.Wait()
		close(results)
		close(taken)
		for err := range results {
			if err != nil {
				t.Fatal(err)
			}
		}
		var ids []int64
		for id := range taken {
			ids = append(ids, id)
		}
		if len(ids) != 1 || ids[0] == 0 {
			t.Fatalf("jobs enqueued by 8 racing workers: %v, want exactly one", ids)
		}
		job, err := store.Queue.Job(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if job.Task != "test.task" || string(job.Kwargs) != `{"report": "daily"}` || job.MaxAttempts != 3 {
			t.Errorf("job %+v is not the schedule's", job)
		}
		list, err := store.Queue.Schedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || !list[0].NextRunAt.Equal(at.Add(time.Minute)) || len(list[0].Runs) != 1 ||
			list[0].Runs[0].JobID != ids[0] || list[0].Runs[0].Outcome() != dlq.StateAvailable {
			t.Errorf("schedules after one occurrence: %+v", list)
		}
	})

	t.Run("AnOccurrenceTakenTwiceIsOneJobByItsKey", func(t *testing.T) {
		t.Parallel()
		// Even past the guard (an operator moved next_run_at back), the
		// occurrence's idempotency key keeps it to one job.
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		if _, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{scheduleDef("report", at)}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := db.Exec(`UPDATE schedules SET next_run_at = $1`, at); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Queue.EnqueueOccurrence(ctx, "report", at, at.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		var jobs int
		if err := db.Get(&jobs, `SELECT count(*) FROM jobs WHERE idempotency_key = $1`, dlq.ScheduleKey("report", at)); err != nil || jobs != 1 {
			t.Fatalf("%d jobs for one occurrence (%v)", jobs, err)
		}
	})

	t.Run("RegisteringKeepsTheFleetsNextRunUnlessTheTimingChanged", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		def := scheduleDef("report", at)
		if _, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{def}); err != nil {
			t.Fatal(err)
		}
		// A later worker computes a later first run: the fleet's stays.
		def.NextRunAt = at.Add(5 * time.Minute)
		def.Queue = "reports"
		next, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{def})
		if err != nil || !next["report"].Equal(at) {
			t.Fatalf("same timing: next %v (%v), want the stored %v", next["report"], err, at)
		}
		def.Every = time.Hour
		next, err = store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{def})
		if err != nil || !next["report"].Equal(def.NextRunAt) {
			t.Fatalf("new timing: next %v (%v), want the new definition's %v", next["report"], err, def.NextRunAt)
		}
		list, _ := store.Queue.Schedules(ctx)
		if list[0].Queue != "reports" || list[0].When() != "every 1h0m0s" {
			t.Errorf("the last registration's definition was not kept: %+v", list[0])
		}
	})

	t.Run("DisabledEnqueuesNothingButMovesOn", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		if _, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{scheduleDef("report", at)}); err != nil {
			t.Fatal(err)
		}
		res, err := store.Queue.SetScheduleEnabled(ctx, dlq.ScheduleChangeParams{Name: "report", Reason: "the report's mail server is down",
			Actor: dlq.Actor{Name: "alice"}, Now: time.Now()})
		if err != nil || res.Schedule.Enabled || res.AuditID == 0 {
			t.Fatalf("disable: %+v, %v", res, err)
		}
		o, err := store.Queue.EnqueueOccurrence(ctx, "report", at, at.Add(time.Minute))
		if err != nil || !o.Taken || o.Enabled || o.JobID != 0 {
			t.Fatalf("occurrence of a disabled schedule: %+v, %v", o, err)
		}
		var jobs int
		if err := db.Get(&jobs, `SELECT count(*) FROM jobs`); err != nil || jobs != 0 {
			t.Fatalf("%d jobs (%v) from a disabled schedule", jobs, err)
		}
		var action, reason, details string
		if err := db.QueryRow(`SELECT action, reason, details::text FROM audit_events WHERE id = $1`, res.AuditID).Scan(&action, &reason, &details); err != nil {
			t.Fatal(err)
		}
		if action != dlq.ActionScheduleDisable || reason != "the report's mail server is down" {
			t.Errorf("audit entry %s %q %s", action, reason, details)
		}
	})

	t.Run("ChangesRefusedInWords", func(t *testing.T) {
		t.Parallel()
		store := storetest.NewStores(storetest.NewDB(t).DB)
		if _, err := store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{scheduleDef("report", at)}); err != nil {
			t.Fatal(err)
		}
		p := dlq.ScheduleChangeParams{Name: "report", Enabled: true, Reason: "why not", Actor: dlq.Actor{Name: "bob"}, Now: time.Now()}
		if _, err := store.Queue.SetScheduleEnabled(ctx, p); dlq.ErrorCode(err) != dlq.EConflict {
			t.Errorf("enabling an enabled schedule: %v, want a conflict", err)
		}
		p.Name = "nope"
		if _, err := store.Queue.SetScheduleEnabled(ctx, p); dlq.ErrorCode(err) != dlq.ENotFound {
			t.Errorf("an unknown schedule: %v, want not found", err)
		}
		p.Name, p.Reason = "report", "  "
		var ve *dlq.ValidationError
		if _, err := store.Queue.SetScheduleEnabled(ctx, p); !errors.As(err, &ve) || ve.Fields["reason"] == "" {
			t.Errorf("no reason: %v, want a validation error on reason", err)
		}
		// A repeat of the same request by its key changes nothing twice.
		p = dlq.ScheduleChangeParams{Name: "report", Reason: "noisy", Actor: dlq.Actor{Name: "bob"}, Now: time.Now(), Key: "k-1"}
		first, err := store.Queue.SetScheduleEnabled(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		again, err := store.Queue.SetScheduleEnabled(ctx, p)
		if err != nil || !again.Repeated || again.AuditID != first.AuditID {
			t.Errorf("repeat: %+v, %v; want the first result, repeated", again, err)
		}
	})
}
