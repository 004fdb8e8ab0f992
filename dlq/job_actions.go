package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Actions on live jobs (issue 14): run a waiting job now, kill it straight
// to the dead letters, or ask the worker running it to cancel the attempt.
// Each is guarded twice: the job is locked and compared with what the
// operator saw (its state and attempt, sent back from the page), and the
// UPDATE itself names the states it may change, so a job that a worker
// claimed, finished or dead-lettered meanwhile is reported, never changed.
// The audit entry is written in the same transaction.

// JobAction names an action on a live job.
type JobAction string

// The actions on live jobs.
const (
	JobRunNow JobAction = "run_now"
	JobKill   JobAction = "kill"
	JobCancel JobAction = "cancel"
)

// Valid reports whether a is a known action.
func (a JobAction) Valid() bool { return a == JobRunNow || a == JobKill || a == JobCancel }

// auditAction is the audit trail's name for a.
func (a JobAction) auditAction() string {
	switch a {
	case JobRunNow:
		return ActionJobRunNow
	case JobKill:
		return ActionJobKill
	default:
		return ActionJobCancel
	}
}

// eligible lists the states a may act on.
func (a JobAction) eligible() []State {
	if a == JobCancel {
		return []State{StateRunning}
	}
	return []State{StateAvailable, StateRetrying}
}

// CancelNotifyChannel is where a cancel request is announced to the worker
// holding the job; the payload is a CancelRequest as JSON.
const CancelNotifyChannel = "redrive_job_cancel"

// MaxBulkJobs bounds one bulk action on jobs: it runs in one transaction
// that locks every job it changes, so a larger selection must be narrowed.
const MaxBulkJobs = 10_000

// CancelRequest is an operator's request to cancel one attempt of a
// running job. It is stored in jobs.cancel_requested (for a worker that
// missed the NOTIFY, which reads it at its next heartbeat) and sent as the
// notification's payload.
type CancelRequest struct {
	JobID   int64     `json:"job_id"`
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	By      string    `json:"by"`
	Reason  string    `json:"reason"`
	Retry   bool      `json:"retry"`
	At      time.Time `json:"at"`
}

// JobActionParams asks for one action on one job.
type JobActionParams struct {
	Action JobAction
	ID     int64
	// SeenState and SeenAttempt are what the operator saw; when set, a job
	// that is no longer so is a *JobStateError and nothing changes.
	SeenState   State
	SeenAttempt *int
	Actor       Actor
	Reason      string
	// Retry, for a cancel: the attempt fails and the job retries (when it
	// has attempts left) instead of dead-lettering as cancelled.
	Retry bool
	Now   time.Time
	Key   string
}

// JobActionResult is what an action on one job did.
type JobActionResult struct {
	JobID int64 `json:"job_id"`
	// State is the job's state after the action (running for a cancel:
	// the worker decides when it stops).
	State        State  `json:"state"`
	DeadLetterID *int64 `json:"dead_letter_id,omitempty"`
	AuditID      int64  `json:"audit_event_id"`
	Repeated     bool   `json:"-"`
}

// JobStateError says a job is not in the state an action needs, or no
// longer in the state the operator saw. It matches ErrConflict.
type JobStateError struct {
	Job    Job
	Action JobAction
	// Changed: the job moved on since the operator's page showed it.
	Changed bool
	// NotDue: run now of a job that is already due.
	NotDue bool
}

func (e *JobStateError) Error() string {
	j := e.Job
	now := fmt.Sprintf("%s (attempt %d/%d)", j.State, j.Attempt, j.MaxAttempts)
	switch {
	case e.Changed && (j.State == StateSucceeded || j.State == StateDead):
		return fmt.Sprintf("the job changed: it finished meanwhile and is now %s; nothing was done", now)
	case e.Changed:
		return fmt.Sprintf("the job changed: it is now %s; nothing was done — reload the page and decide again", now)
	case e.NotDue:
		return fmt.Sprintf("job %d is already due and waits for a worker; there is nothing to run sooner", j.ID)
	case e.Action == JobCancel:
		return fmt.Sprintf("job %d is %s, not running; only a running job can be cancelled", j.ID, now)
	case e.Action == JobKill:
		return fmt.Sprintf("job %d is %s; only an available, scheduled or retrying job can be killed", j.ID, now)
	default:
		return fmt.Sprintf("job %d is %s; only a retrying or scheduled job can be run now", j.ID, now)
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *JobStateError) Is(target error) bool { return target == ErrConflict }

// As finds a JobStateError as an Error coded EConflict.
func (e *JobStateError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

const jobForUpdateSQL = `SELECT ` + jobColumns + `, now() AS db_now FROM jobs WHERE id = $1 FOR UPDATE`

// ActOnJob applies one action to one job in one transaction: lock, compare
// with what the operator saw, guarded change, audit.
func (s *Store) ActOnJob(ctx context.Context, p JobActionParams) (JobActionResult, error) {
	if !p.Action.Valid() {
		return JobActionResult{}, &ValidationError{Fields: map[string]string{"action": "must be run_now, kill or cancel"}}
	}
	var res JobActionResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		hash := requestHash(p.Action.auditAction(), p.ID, p.SeenState, p.SeenAttempt, p.Reason, p.Retry)
		repeated, err := onceWithKey(ctx, tx, p.Key, p.Actor, p.Action.auditAction(), hash, &res, func() error {
			var err error
			res, err = s.actOnJobInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return JobActionResult{}, fmt.Errorf("%s job %d: %w", strings.ReplaceAll(string(p.Action), "_", " "), p.ID, err)
	}
	return res, nil
}

func (s *Store) actOnJobInTx(ctx context.Context, tx *sqlx.Tx, p JobActionParams) (JobActionResult, error) {
	var row struct {
		Job
		DBNow time.Time `db:"db_now"`
	}
	if err := tx.GetContext(ctx, &row, jobForUpdateSQL, p.ID); err != nil {
		return JobActionResult{}, translate(err)
	}
	j := row.Job
	if (p.SeenState != "" && j.State != p.SeenState) || (p.SeenAttempt != nil && j.Attempt != *p.SeenAttempt) {
		return JobActionResult{}, &JobStateError{Job: j, Action: p.Action, Changed: true}
	}
	if !eligibleState(p.Action, j.State) {
		return JobActionResult{}, &JobStateError{Job: j, Action: p.Action}
	}
	res := JobActionResult{JobID: j.ID}
	details := map[string]any{"job_id": j.ID, "task": j.Task, "queue": j.Queue, "state_before": j.State, "attempt": j.Attempt}
	counts := map[string]int{}
	switch p.Action {
	case JobRunNow:
		if !j.RunAt.After(row.DBNow) {
			return JobActionResult{}, &JobStateError{Job: j, Action: p.Action, NotDue: true}
		}
		n, err := runNowInTx(ctx, tx, []int64{j.ID})
		if err != nil {
			return JobActionResult{}, err
		}
		if n != 1 {
			return JobActionResult{}, &JobStateError{Job: j, Action: p.Action, Changed: true}
		}
		res.State, counts["run_now"] = j.State, 1
		details["run_at_before"] = j.RunAt
	case JobKill:
		letters, err := s.killInTx(ctx, tx, []int64{j.ID}, killEntry(p.Actor.Name, p.Reason, p.Now))
		if err != nil {
			return JobActionResult{}, err
		}
		if len(letters) != 1 {
			return JobActionResult{}, &JobStateError{Job: j, Action: p.Action, Changed: true}
		}
		res.State, res.DeadLetterID, counts["killed"] = StateDead, &letters[0].LetterID, 1
	case JobCancel:
		req := CancelRequest{JobID: j.ID, Attempt: j.Attempt, Worker: deref(j.LeaseOwner), By: p.Actor.Name,
			Reason: p.Reason, Retry: p.Retry, At: p.Now}
		if err := requestCancelInTx(ctx, tx, req); err != nil {
			return JobActionResult{}, err
		}
		res.State, counts["cancel_requested"] = StateRunning, 1
		details["worker"], details["retry"] = req.Worker, req.Retry
	}
	auditID, err := appendAudit(ctx, tx, AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: p.Action.auditAction(), DeadLetterID: res.DeadLetterID,
		Counts: mustJSON(counts), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: mustJSON(details),
	})
	if err != nil {
		return JobActionResult{}, err
	}
	res.AuditID = auditID
	return res, nil
}

func eligibleState(a JobAction, s State) bool {
	for _, e := range a.eligible() {
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
		return 0, fmt.Errorf("run now: %w", translate(err))
	}
	return n, nil
}

// KilledClass is the error class of a letter killed before it ever failed.
const KilledClass = "Killed"

// killEntry is the history entry that says who killed a job and why.
func killEntry(by, reason string, at time.Time) Attempt {
	msg := "killed by " + by
	if reason != "" {
		msg += ": " + reason
	}
	return Attempt{At: at, Class: KilledClass, Message: msg, Outcome: OutcomeKilled}
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
const killLettersSQL = `
INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, replay_of)
SELECT j.id, j.queue, j.task, j.args, j.kwargs, j.idempotency_key, o.class, o.message, o.traceback,
	j.attempt, j.max_attempts, j.errors, 'killed', coalesce((SELECT m.into_id FROM error_group_merges m WHERE m.from_id = o.fingerprint), o.fingerprint), o.version, j.created_at, j.replay_of
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
	AS o(id, class, message, traceback, fingerprint, version)
JOIN jobs j ON j.id = o.id
ORDER BY j.id
RETURNING job_id, id`

// killInTx kills the waiting jobs among ids and writes their letters. A
// letter keeps the job's last real error (so it lands in that error's
// group, where the fix will be replayed from); a job that never failed
// gets the kill itself as its error.
func (s *Store) killInTx(ctx context.Context, tx *sqlx.Tx, ids []int64, entry Attempt) ([]DeadLetterResult, error) {
	raw, err := json.Marshal(entry)
	if err != nil {
		return nil, fmt.Errorf("kill jobs: %w", err)
	}
	var rows []struct {
		ID     int64    `db:"id"`
		Task   string   `db:"task"`
		Errors Attempts `db:"errors"`
	}
	if err := tx.SelectContext(ctx, &rows, killJobsSQL, pq.Array(ids), summary(entry), raw); err != nil {
		return nil, fmt.Errorf("kill jobs: %w", translate(err))
	}
	if len(rows) == 0 {
		return nil, nil
	}
	n := len(rows)
	lids, classes, messages := make([]int64, n), make([]string, n), make([]string, n)
	tracebacks, fingerprints, versions := make([]string, n), make([]string, n), make([]string, n)
	for i, r := range rows {
		a := lastFailure(r.Errors, entry)
		lids[i], classes[i], messages[i], tracebacks[i], versions[i] = r.ID, a.Class, a.Message, a.Traceback, a.Version
		if fingerprints[i], err = s.groupOf(ctx, r.Task, a.Class, a.Message, a.Traceback); err != nil {
			return nil, fmt.Errorf("kill jobs: %w", err)
		}
	}
	var letters []DeadLetterResult
	err = tx.SelectContext(ctx, &letters, killLettersSQL, pq.Array(lids), pq.Array(classes), pq.Array(messages),
		pq.Array(tracebacks), pq.Array(fingerprints), pq.Array(versions))
	if err != nil {
		return nil, fmt.Errorf("kill jobs: write letters: %w", translate(err))
	}
	return letters, nil
}

// lastFailure is the newest attempt that failed with an error of its own
// (not a hand-back or the kill), else the kill entry.
func lastFailure(history Attempts, kill Attempt) Attempt {
	for i := len(history) - 1; i >= 0; i-- {
		a := history[i]
		if a.Class != "" && a.Outcome != OutcomeKilled && a.Outcome != OutcomeInterrupted {
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
SELECT count(*) FROM asked, LATERAL (SELECT pg_notify('` + CancelNotifyChannel + `', $3::text)) notified`

func requestCancelInTx(ctx context.Context, tx *sqlx.Tx, req CancelRequest) error {
	raw, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("request cancel: %w", err)
	}
	var n int64
	if err := tx.GetContext(ctx, &n, requestCancelSQL, req.JobID, req.Attempt, string(raw)); err != nil {
		return fmt.Errorf("request cancel: %w", translate(err))
	}
	if n != 1 {
		return fmt.Errorf("request cancel: %w", ErrConflict)
	}
	return nil
}

// cancelRequestsSQL finds the cancel requests for the attempts a worker
// holds: how a worker that missed the NOTIFY (no LISTEN connection, or it
// was down) learns of them, at its next heartbeat. A request for an earlier
// attempt is stale and ignored.
const cancelRequestsSQL = `
SELECT j.cancel_requested FROM jobs j
JOIN unnest($1::bigint[], $2::int[]) AS held(id, attempt) ON held.id = j.id AND held.attempt = j.attempt
WHERE j.state = 'running' AND j.lease_owner = $3 AND j.cancel_requested IS NOT NULL
	AND (j.cancel_requested->>'attempt')::int = j.attempt`

// CancelRequests returns the cancel requests for attempts worker holds.
func (s *Store) CancelRequests(ctx context.Context, worker string, held []Lease) ([]CancelRequest, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids, attempts := leaseArrays(held)
	var raws [][]byte
	if err := s.db.SelectContext(ctx, &raws, cancelRequestsSQL, pq.Array(ids), pq.Array(attempts), worker); err != nil {
		return nil, fmt.Errorf("read cancel requests: %w", err)
	}
	out := make([]CancelRequest, 0, len(raws))
	for _, raw := range raws {
		var r CancelRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("read cancel requests: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseCancelRequest reads a cancel notification's payload.
func ParseCancelRequest(payload string) (CancelRequest, error) {
	var r CancelRequest
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		return CancelRequest{}, fmt.Errorf("cancel request: %w", err)
	}
	return r, nil
}
