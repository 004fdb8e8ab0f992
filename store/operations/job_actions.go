package operations

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
)

const jobForUpdateSQL = `SELECT ` + queue.JobColumns + `, now() AS db_now FROM jobs WHERE id = $1 FOR UPDATE`

// ActOnJob applies one action to one job in one transaction: lock, compare
// with what the operator saw, guarded change, audit.
func (s *Store) ActOnJob(ctx context.Context, p dlq.JobActionParams) (dlq.JobActionResult, error) {
	if !p.Action.Valid() {
		return dlq.JobActionResult{}, &dlq.ValidationError{Fields: map[string]string{"action": "must be run_now, kill or cancel"}}
	}
	var res dlq.JobActionResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash(p.Action.AuditAction(), p.ID, p.SeenState, p.SeenAttempt, p.Reason, p.Retry)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, p.Action.AuditAction(), hash, &res, func() error {
			var err error
			res, err = s.actOnJobInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return dlq.JobActionResult{}, fmt.Errorf("%s job %d: %w", strings.ReplaceAll(string(p.Action), "_", " "), p.ID, err)
	}
	return res, nil
}

// actOnJobInTx is ActOnJob's work inside tx: lock the job as the
// operator saw it, act on it, and audit what the action did.
func (s *Store) actOnJobInTx(ctx context.Context, tx *sqlx.Tx, p dlq.JobActionParams) (dlq.JobActionResult, error) {
	j, dbNow, err := lockJobAsSeen(ctx, tx, p)
	if err != nil {
		return dlq.JobActionResult{}, err
	}
	act := jobActed{
		res:     dlq.JobActionResult{JobID: j.ID},
		counts:  map[string]int{},
		details: map[string]any{"job_id": j.ID, "task": j.Task, "queue": j.Queue, "state_before": j.State, "attempt": j.Attempt},
	}
	if err := s.applyJobAction(ctx, tx, p, j, dbNow, &act); err != nil {
		return dlq.JobActionResult{}, err
	}
	auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: p.Action.AuditAction(), DeadLetterID: act.res.DeadLetterID,
		Counts: audit.MustJSON(act.counts), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(act.details),
	})
	if err != nil {
		return dlq.JobActionResult{}, err
	}
	act.res.AuditID = auditID
	return act.res, nil
}

// jobActed is what an action on one job did: its result, and the counts
// and details of its audit entry.
type jobActed struct {
	res     dlq.JobActionResult
	counts  map[string]int
	details map[string]any
}

// lockJobAsSeen locks the job p.ID and returns it with the database's
// clock, or a *dlq.JobStateError when it is no longer in the state and
// attempt the operator saw, or in no state the action applies to.
func lockJobAsSeen(ctx context.Context, tx *sqlx.Tx, p dlq.JobActionParams) (dlq.Job, time.Time, error) {
	var row struct {
		dlq.Job
		DBNow time.Time `db:"db_now"`
	}
	if err := tx.GetContext(ctx, &row, jobForUpdateSQL, p.ID); err != nil {
		return dlq.Job{}, time.Time{}, postgres.Translate(err)
	}
	j := row.Job
	if (p.SeenState != "" && j.State != p.SeenState) || (p.SeenAttempt != nil && j.Attempt != *p.SeenAttempt) {
		return dlq.Job{}, time.Time{}, &dlq.JobStateError{Job: j, Action: p.Action, Changed: true}
	}
	if !eligibleState(p.Action, j.State) {
		return dlq.Job{}, time.Time{}, &dlq.JobStateError{Job: j, Action: p.Action}
	}
	return j, row.DBNow, nil
}

// applyJobAction does p.Action to the locked job j, recording in act
// what it did.
func (s *Store) applyJobAction(ctx context.Context, tx *sqlx.Tx, p dlq.JobActionParams, j dlq.Job, dbNow time.Time, act *jobActed) error {
	switch p.Action {
	case dlq.JobRunNow:
		return runJobNow(ctx, tx, p, j, dbNow, act)
	case dlq.JobKill:
		return s.killJob(ctx, tx, p, j, act)
	case dlq.JobCancel:
		return cancelJob(ctx, tx, p, j, act)
	}
	return nil
}

// runJobNow moves a job due later to now; one already due is refused.
func runJobNow(ctx context.Context, tx *sqlx.Tx, p dlq.JobActionParams, j dlq.Job, dbNow time.Time, act *jobActed) error {
	if !j.RunAt.After(dbNow) {
		return &dlq.JobStateError{Job: j, Action: p.Action, NotDue: true}
	}
	n, err := runNowInTx(ctx, tx, []int64{j.ID})
	if err != nil {
		return err
	}
	if n != 1 {
		return &dlq.JobStateError{Job: j, Action: p.Action, Changed: true}
	}
	act.res.State, act.counts["run_now"] = j.State, 1
	act.details["run_at_before"] = j.RunAt
	return nil
}

// killJob dead-letters the job at once.
func (s *Store) killJob(ctx context.Context, tx *sqlx.Tx, p dlq.JobActionParams, j dlq.Job, act *jobActed) error {
	letters, err := s.killInTx(ctx, tx, []int64{j.ID}, killEntry(p.Actor.Name, p.Reason, p.Now))
	if err != nil {
		return err
	}
	if len(letters) != 1 {
		return &dlq.JobStateError{Job: j, Action: p.Action, Changed: true}
	}
	act.res.State, act.res.DeadLetterID, act.counts["killed"] = dlq.StateDead, &letters[0].LetterID, 1
	return nil
}

// cancelJob asks the worker running the job to cancel it.
func cancelJob(ctx context.Context, tx *sqlx.Tx, p dlq.JobActionParams, j dlq.Job, act *jobActed) error {
	req := dlq.CancelRequest{JobID: j.ID, Attempt: j.Attempt, Worker: deref(j.LeaseOwner), By: p.Actor.Name,
		Reason: p.Reason, Retry: p.Retry, At: p.Now}
	if err := requestCancelInTx(ctx, tx, req); err != nil {
		return err
	}
	act.res.State, act.counts["cancel_requested"] = dlq.StateRunning, 1
	act.details["worker"], act.details["retry"] = req.Worker, req.Retry
	return nil
}

func eligibleState(a dlq.JobAction, s dlq.State) bool {
	for _, e := range a.Eligible() {
		if e == s {
			return true
		}
	}
	return false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// runNowSQL moves due-later jobs to now and wakes the workers of their
// queues (the insert trigger does not fire on UPDATE). The state and
// run_at in the WHERE clause are the guard: a job claimed meanwhile is
// running, one already due has nothing to gain.
const runNowSQL = `
WITH moved AS (
	UPDATE jobs SET run_at = now()
	WHERE id = ANY($1) AND state IN ('available', 'retrying') AND run_at > now()
	RETURNING queue
)
SELECT count(*) FROM moved, LATERAL (SELECT pg_notify('redrive_jobs', queue)) notified`

func runNowInTx(ctx context.Context, tx *sqlx.Tx, ids []int64) (int64, error) {
	var n int64
	if err := tx.GetContext(ctx, &n, runNowSQL, pq.Array(ids)); err != nil {
		return 0, fmt.Errorf("run now: %w", postgres.Translate(err))
	}
	return n, nil
}

// killEntry is the history entry that says who killed a job and why.
func killEntry(by, reason string, at time.Time) dlq.Attempt {
	msg := "killed by " + by
	if reason != "" {
		msg += ": " + reason
	}
	return dlq.Attempt{At: at, Class: dlq.KilledClass, Message: msg, Outcome: dlq.OutcomeKilled}
}

// killJobsSQL marks waiting jobs dead, appending the kill to each one's
// history (with its own attempt number). The state list is the guard.
const killJobsSQL = `
UPDATE jobs j SET state = 'dead', finished_at = now(),
	last_error = COALESCE(j.last_error, $2),
	errors = j.errors || jsonb_build_array(jsonb_set($3::jsonb, '{attempt}', to_jsonb(j.attempt)))
WHERE j.id = ANY($1) AND j.state IN ('available', 'retrying')
RETURNING j.id, j.task, j.errors`

// killLettersSQL writes the letters of jobs killJobsSQL just marked dead,
// from their rows, with the error the Go side chose for each.
var killLettersSQL = `
WITH templates AS (` + letterpack.InsertTemplatesSQL("$7", "$8") + `)
INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, traceback_template, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, replay_of)
SELECT j.id, j.queue, j.task, j.args, j.kwargs, j.idempotency_key, o.class, o.message, o.traceback,
	` + letterpack.HashSQL("o.template") + `, j.attempt, j.max_attempts, j.errors, 'killed', coalesce((SELECT m.into_id FROM error_group_merges m WHERE m.from_id = o.fingerprint), o.fingerprint), o.version, j.created_at, j.replay_of
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $9::text[])
	AS o(id, class, message, traceback, fingerprint, version, template)
JOIN jobs j ON j.id = o.id
ORDER BY j.id
RETURNING job_id, id`

// killInTx kills the waiting jobs among ids and writes their letters. A
// letter keeps the job's last real error (so it lands in that error's
// group, where the fix will be replayed from); a job that never failed
// gets the kill itself as its error.
func (s *Store) killInTx(ctx context.Context, tx *sqlx.Tx, ids []int64, entry dlq.Attempt) ([]dlq.DeadLetterResult, error) {
	raw, err := json.Marshal(entry)
	if err != nil {
		return nil, fmt.Errorf("kill jobs: %w", err)
	}
	var rows []struct {
		ID     int64        `db:"id"`
		Task   string       `db:"task"`
		Errors dlq.Attempts `db:"errors"`
	}
	if err := tx.SelectContext(ctx, &rows, killJobsSQL, pq.Array(ids), queue.Summary(entry), raw); err != nil {
		return nil, fmt.Errorf("kill jobs: %w", postgres.Translate(err))
	}
	if len(rows) == 0 {
		return nil, nil
	}
	n := len(rows)
	lids, classes, messages := make([]int64, n), make([]string, n), make([]string, n)
	tracebacks, fingerprints, versions := make([]string, n), make([]string, n), make([]string, n)
	var packed letterpack.Batch
	templates := make([]string, n)
	for i, r := range rows {
		a := lastFailure(r.Errors, entry)
		lids[i], classes[i], messages[i], versions[i] = r.ID, a.Class, a.Message, a.Version
		tracebacks[i], templates[i] = packed.Add(a.Traceback, a.Message)
		if fingerprints[i], err = s.groups.GroupOf(ctx, r.Task, a.Class, a.Message, a.Traceback); err != nil {
			return nil, fmt.Errorf("kill jobs: %w", err)
		}
	}
	var letters []dlq.DeadLetterResult
	err = tx.SelectContext(ctx, &letters, killLettersSQL, pq.Array(lids), pq.Array(classes), pq.Array(messages),
		pq.Array(tracebacks), pq.Array(fingerprints), pq.Array(versions),
		pq.Array(packed.Hashes), pq.Array(packed.Templates), pq.Array(templates))
	if err != nil {
		return nil, fmt.Errorf("kill jobs: write letters: %w", postgres.Translate(err))
	}
	return letters, nil
}

// lastFailure is the newest attempt that failed with an error of its own
// (not a hand-back or the kill), else the kill entry.
func lastFailure(history dlq.Attempts, kill dlq.Attempt) dlq.Attempt {
	for i := len(history) - 1; i >= 0; i-- {
		a := history[i]
		if a.Class != "" && a.Outcome != dlq.OutcomeKilled && a.Outcome != dlq.OutcomeInterrupted {
			return a
		}
	}
	return kill
}

// requestCancelSQL records the request on the running attempt it is for
// and announces it; NOTIFY is sent when the transaction commits, so a
// worker never hears of a request that rolled back.
const requestCancelSQL = `
WITH asked AS (
	UPDATE jobs SET cancel_requested = $3::jsonb
	WHERE id = $1 AND attempt = $2 AND state = 'running'
	RETURNING id
)
SELECT count(*) FROM asked, LATERAL (SELECT pg_notify('` + dlq.CancelNotifyChannel + `', $3::text)) notified`

func requestCancelInTx(ctx context.Context, tx *sqlx.Tx, req dlq.CancelRequest) error {
	raw, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	var n int64
	if err := tx.GetContext(ctx, &n, requestCancelSQL, req.JobID, req.Attempt, string(raw)); err != nil {
		return fmt.Errorf("request cancel: %w", postgres.Translate(err))
	}
	if n != 1 {
		return fmt.Errorf("request cancel: %w", dlq.ErrConflict)
	}
	return nil
}
