package queue

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

const registerWorkerSQL = `
INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency)
VALUES ($1, $2, $3, $4, $5, coalesce($6, '{}'::text[]), $7)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`

// registerTasksSQL locks the tasks' rows in name order, whatever order the
// caller lists them in: a worker and a producer registering the same tasks
// at the same moment would otherwise deadlock, each holding a row the other
// waits for.
const registerTasksSQL = `
INSERT INTO tasks (name) SELECT DISTINCT name FROM unnest($1::text[]) AS t(name) ORDER BY name
ON CONFLICT (name) DO UPDATE SET last_seen_at = now()`

// RegisterWorker records a starting worker and the tasks it can run; from
// then on those tasks may be enqueued.
func (s *Store) RegisterWorker(ctx context.Context, w dlq.WorkerInfo) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("register worker: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, registerWorkerSQL, w.ID, w.Host, w.PID, w.Version,
		pq.Array(w.Queues), pq.Array(w.Tasks), w.Concurrency); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	if err := registerTasks(ctx, tx, w.Tasks); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("register worker: commit: %w", err)
	}
	return nil
}

// RegisterTasks records task names as runnable without a worker process,
// for producers that enqueue before their workers first start.
func (s *Store) RegisterTasks(ctx context.Context, tasks []string) error {
	return registerTasks(ctx, s.db, tasks)
}

func registerTasks(ctx context.Context, ex sqlx.ExecerContext, tasks []string) error {
	if len(tasks) == 0 {
		return nil
	}
	if _, err := ex.ExecContext(ctx, registerTasksSQL, pq.Array(tasks)); err != nil {
		return fmt.Errorf("register tasks: %w", err)
	}
	return nil
}

// Heartbeat refreshes a worker's liveness and in-flight count. It reports
// false when the worker has no row (it was forgotten after a long silence:
// see ForgetVanishedWorkers), so the worker can register again.
func (s *Store) Heartbeat(ctx context.Context, workerID string, inFlight int) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE workers SET heartbeat_at = now(), in_flight = $2 WHERE id = $1`, workerID, inFlight)
	if err != nil {
		return false, fmt.Errorf("worker heartbeat: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("worker heartbeat: %w", err)
	}
	return n == 1, nil
}

// UnregisterWorker removes a worker that stopped cleanly.
func (s *Store) UnregisterWorker(ctx context.Context, workerID string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM workers WHERE id = $1`, workerID); err != nil {
		return fmt.Errorf("unregister worker: %w", err)
	}
	return nil
}

// ForgetVanishedWorkers deletes the rows of workers whose last heartbeat is
// older than WorkerForgetAfter, except those still named as the lease
// owner of a running job: the rescuer reads their host and version into
// the attempt it records. It returns how many it deleted.
func (s *Store) ForgetVanishedWorkers(ctx context.Context) (int64, error) {
	res, err := s.db.ExecContext(ctx, `
		DELETE FROM workers w
		WHERE w.heartbeat_at < now() - $1 * interval '1 second'
		  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'running' AND j.lease_owner = w.id)`,
		dlq.WorkerForgetAfter.Seconds())
	if err != nil {
		return 0, fmt.Errorf("forget vanished workers: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("forget vanished workers: %w", err)
	}
	return n, nil
}

// Workers lists registered workers, most recently started first.
func (s *Store) Workers(ctx context.Context) ([]dlq.WorkerInfo, error) {
	var ws []dlq.WorkerInfo
	err := s.db.SelectContext(ctx, &ws, `SELECT id, host, pid, version, queues, tasks, concurrency, in_flight,
		started_at, heartbeat_at FROM workers ORDER BY started_at DESC, id`, postgres.Prepared)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}
