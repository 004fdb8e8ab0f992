package operations

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
)

// EnqueueJob enqueues one job an operator typed in and audits it, in one
// transaction: an unknown task or a bad field is refused with nothing
// written, and a form sent twice (p.Key) enqueues once.
func (s *Store) EnqueueJob(ctx context.Context, p dlq.EnqueueJobParams) (dlq.EnqueueJobResult, error) {
	job, err := p.Job.Normalise()
	if err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	var res dlq.EnqueueJobResult
	err = postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash(dlq.ActionJobEnqueue, job.Task, job.Queue, audit.CanonJSON(job.Args), audit.CanonJSON(job.Kwargs),
			job.MaxAttempts, job.RunAt, p.Reason)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, dlq.ActionJobEnqueue, hash, &res, func() error {
			var err error
			res, err = enqueueJobInTx(ctx, tx, job, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return dlq.EnqueueJobResult{}, fmt.Errorf("enqueue %s: %w", job.Task, err)
	}
	return res, nil
}

// enqueueJobInTx is EnqueueJob's work inside tx.
func enqueueJobInTx(ctx context.Context, tx *sqlx.Tx, job dlq.EnqueueParams, p dlq.EnqueueJobParams) (dlq.EnqueueJobResult, error) {
	enq, err := queue.Enqueue(ctx, tx, job)
	if err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	details := map[string]any{"job_id": enq.Job.ID, "task": enq.Job.Task, "queue": enq.Job.Queue, "max_attempts": enq.Job.MaxAttempts}
	if !job.RunAt.IsZero() {
		details["run_at"] = job.RunAt.UTC().Format(time.RFC3339)
	}
	auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionJobEnqueue,
		Counts: audit.MustJSON(map[string]int{"enqueued": 1}), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(details),
	})
	if err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	return dlq.EnqueueJobResult{JobID: enq.Job.ID, AuditID: auditID}, nil
}
