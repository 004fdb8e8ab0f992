package operations

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
)

// insertTestRunSQL links a test job to the letter it tries (00119): not
// jobs.replay_of, which would count it as the letter's replay.
const insertTestRunSQL = `INSERT INTO test_runs (job_id, dead_letter_id, requested_by, requested_at) VALUES ($1, $2, $3, $4)`

// testRunsSQL lists a letter's test jobs, newest first, with their jobs as
// they are now (none once the cleaner removed one that succeeded) and the
// letter a dead one became (dead_letters_job_id_key finds it).
const testRunsSQL = `
SELECT t.job_id, t.dead_letter_id, t.requested_by, t.requested_at,
	coalesce(j.queue, '') AS queue, coalesce(j.state, '') AS state, coalesce(j.attempt, 0) AS attempt,
	coalesce(j.max_attempts, 0) AS max_attempts, j.last_error, j.finished_at,
	(SELECT d.id FROM dead_letter_records d WHERE d.job_id = t.job_id) AS died_as_letter,
	coalesce(j.args, '[]') AS args, coalesce(j.kwargs, '{}') AS kwargs
FROM test_runs t LEFT JOIN jobs j ON j.id = t.job_id
WHERE t.dead_letter_id = $1
ORDER BY t.job_id DESC LIMIT $2`

// TestRunDeadLetter enqueues one test job from the letter p.LetterID, as
// edited, where p.Target says, links it to the letter and audits it, in one
// transaction. The letter is neither claimed nor settled: it stays as it
// is, whatever its status, and a replay racing the test run is not held
// up. Another system's letter runs there, not in Redrive's queue: refused.
func (s *Store) TestRunDeadLetter(ctx context.Context, p dlq.TestRunParams) (dlq.TestRunResult, error) {
	if err := p.Target.Validate(p.Now); err != nil {
		return dlq.TestRunResult{}, err
	}
	var res dlq.TestRunResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash(dlq.ActionTestRun, p.LetterID, audit.CanonJSON(p.Args), audit.CanonJSON(p.Kwargs), p.Reason, p.Target)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, dlq.ActionTestRun, hash, &res, func() error {
			var err error
			res, err = testRunInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return dlq.TestRunResult{}, fmt.Errorf("test run of dead letter %d: %w", p.LetterID, err)
	}
	return res, nil
}

// testRunInTx is TestRunDeadLetter's work inside tx.
func testRunInTx(ctx context.Context, tx *sqlx.Tx, p dlq.TestRunParams) (dlq.TestRunResult, error) {
	var l dlq.DeadLetter
	if err := tx.GetContext(ctx, &l, letterSQL, p.LetterID); err != nil {
		return dlq.TestRunResult{}, fmt.Errorf("dead letter %d: %w", p.LetterID, postgres.Translate(err))
	}
	src, err := sourceOf(ctx, tx, l.ID)
	if err != nil {
		return dlq.TestRunResult{}, err
	}
	if src != nil {
		return dlq.TestRunResult{}, dlq.Errorf(dlq.EConflict,
			"dead letter %d is a job of %s, whose workers run its tasks: a test job here would run on Redrive's workers, which may not know it", l.ID, src.Name)
	}
	args, kwargs, edited, err := replayPayload(dlq.ReplayParams{Args: p.Args, Kwargs: p.Kwargs}, l)
	if err != nil {
		return dlq.TestRunResult{}, err
	}
	q, attempts := cmp.Or(p.Target.Queue, l.Queue), cmp.Or(p.Target.MaxAttempts, dlq.TestRunMaxAttempts)
	enq, err := queue.Enqueue(ctx, tx, dlq.EnqueueParams{Task: l.Task, Queue: q, Args: args, Kwargs: kwargs,
		MaxAttempts: attempts, RunAt: p.Target.StartAt})
	if err != nil {
		return dlq.TestRunResult{}, err
	}
	if _, err := tx.ExecContext(ctx, insertTestRunSQL, enq.Job.ID, l.ID, p.Actor.Name, p.Now); err != nil {
		return dlq.TestRunResult{}, fmt.Errorf("link test job %d: %w", enq.Job.ID, postgres.Translate(err))
	}
	auditID, err := auditTestRun(ctx, tx, p, l, enq.Job, edited, args, kwargs)
	if err != nil {
		return dlq.TestRunResult{}, err
	}
	return dlq.TestRunResult{JobID: enq.Job.ID, AuditID: auditID}, nil
}

// auditTestRun appends the test run's entry: the job, where it runs, and
// the arguments before and after when they were edited.
func auditTestRun(ctx context.Context, tx *sqlx.Tx, p dlq.TestRunParams, l dlq.DeadLetter, job dlq.Job,
	edited bool, args, kwargs json.RawMessage) (int64, error) {
	details := map[string]any{"test_job_id": job.ID, "task": l.Task, "queue": job.Queue, "max_attempts": job.MaxAttempts}
	if !p.Target.StartAt.IsZero() {
		details["start_at"] = p.Target.StartAt.UTC().Format("2006-01-02T15:04:05Z07:00")
	}
	if edited {
		details["before"] = map[string]json.RawMessage{"args": l.Args, "kwargs": l.Kwargs}
		details["after"] = map[string]json.RawMessage{"args": args, "kwargs": kwargs}
	}
	id := l.ID
	return audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionTestRun, DeadLetterID: &id,
		Counts: audit.MustJSON(map[string]int{"test_runs": 1}), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(details),
	})
}

// TestRuns lists the newest limit test jobs of the letter id.
func (s *Store) TestRuns(ctx context.Context, id int64, limit int) ([]dlq.TestRun, error) {
	var out []dlq.TestRun
	if err := s.db.SelectContext(ctx, &out, testRunsSQL, postgres.Prepared, id, limit); err != nil {
		return nil, fmt.Errorf("test runs of dead letter %d: %w", id, postgres.Translate(err))
	}
	return out, nil
}
