package demo_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

func TestProducer(t *testing.T) {
	t.Parallel()

	t.Run("KeepsARealisticMixFlowingUntilCancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p, err := demo.NewProducer(demo.ProducerConfig{Store: b.store.Queue, Rate: 400, Seed: 7,
			Logger: slog.New(slog.NewTextHandler(b.logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		storetest.WaitFor(t, 10*time.Second, "200 jobs enqueued", func() bool {
			var n int
			if err := b.db.Get(&n, `SELECT count(*) FROM jobs`); err != nil {
				t.Fatal(err)
			}
			return n >= 200
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v after cancel", err)
		}

		var jobs []struct {
			Queue       string          `db:"queue"`
			Task        string          `db:"task"`
			Key         *string         `db:"idempotency_key"`
			MaxAttempts int             `db:"max_attempts"`
			Kwargs      json.RawMessage `db:"kwargs"`
		}
		if err := b.db.Select(&jobs, `SELECT queue, task, idempotency_key, max_attempts, kwargs FROM jobs`); err != nil {
			t.Fatal(err)
		}
		queues, tasks := map[string]int{}, map[string]int{}
		for _, j := range jobs {
			queues[j.Queue]++
			tasks[j.Task]++
			if j.Key == nil || *j.Key == "" || j.MaxAttempts > 4 || len(j.Kwargs) < 10 {
				t.Errorf("unrealistic job: %+v", j)
			}
			if !slices.Contains(demo.TaskNames(), j.Task) {
				t.Errorf("unknown task %s", j.Task)
			}
		}
		for _, q := range []string{"default", "payments", "emails"} {
			if queues[q] == 0 {
				t.Errorf("no job on queue %s: %v", q, queues)
			}
		}
		if len(tasks) < 5 || tasks[demo.TaskNoop] < tasks[demo.TaskPanic] {
			t.Errorf("mix: %v", tasks)
		}
	})

	t.Run("WithAWorkerMostJobsSucceedAndTheRestDeadLetter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, func(c *worker.Config) { c.Concurrency = 20 })
		p, err := demo.NewProducer(demo.ProducerConfig{Store: b.store.Queue, Rate: 300, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		if err := p.Run(ctx); err != nil {
			t.Fatal(err)
		}
		storetest.WaitFor(t, 20*time.Second, "every job to end", func() bool {
			var open int
			if err := b.db.Get(&open, `SELECT count(*) FROM jobs WHERE state NOT IN ('succeeded', 'dead')`); err != nil {
				t.Fatal(err)
			}
			return open == 0
		})
		var succeeded, dead, letters int
		_ = b.db.Get(&succeeded, `SELECT count(*) FROM jobs WHERE state = 'succeeded'`)
		_ = b.db.Get(&dead, `SELECT count(*) FROM jobs WHERE state = 'dead'`)
		_ = b.db.Get(&letters, `SELECT count(*) FROM dead_letters`)
		if dead == 0 || succeeded < 4*dead || letters != dead {
			t.Fatalf("succeeded %d, dead %d, letters %d: want mostly successes and one letter per dead job", succeeded, dead, letters)
		}
		var classes []string
		if err := b.db.Select(&classes, `SELECT DISTINCT error_class FROM dead_letters ORDER BY 1`); err != nil {
			t.Fatal(err)
		}
		t.Logf("succeeded %d, dead %d, classes %v", succeeded, dead, classes)
		if len(classes) < 3 {
			t.Fatalf("dead letters of too few kinds: %v", classes)
		}
	})

	t.Run("RejectsBadConfig", func(t *testing.T) {
		t.Parallel()
		if _, err := demo.NewProducer(demo.ProducerConfig{}); err == nil {
			t.Error("a producer without a store must be refused")
		}
		if _, err := demo.NewProducer(demo.ProducerConfig{Store: &queue.Store{}, Rate: -1}); err == nil {
			t.Error("a negative rate must be refused")
		}
	})
}
