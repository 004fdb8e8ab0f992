package operations

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
)

const letterSQL = `SELECT ` + letters.DeadLetterColumns + ` FROM dead_letters WHERE id = $1`

// claimPendingSQL is the guard of a replay or a discard: it deletes the
// letter's pending row, so of two actions racing for a letter (a bulk
// batch among them) only the one whose DELETE removed the row goes on; the
// other's DELETE waits for it, then finds nothing (claimLetter).
const claimPendingSQL = `DELETE FROM pending_dead_letters WHERE id = $1`

// The outcomes, written once the letter is claimed (the letter's own row is
// never rewritten: 00101_letters.sql).
const (
	insertReplayedSQL = `
INSERT INTO dead_letter_outcomes (dead_letter_id, failed_at, task, queue, replayed_at, replayed_by, replay_job_id)
VALUES ($1, $2, $3, $4, now(), $5, $6)`
	insertDiscardedSQL = `
INSERT INTO dead_letter_outcomes (dead_letter_id, failed_at, task, queue, discarded_at, discarded_by, discard_reason)
VALUES ($1, $2, $3, $4, now(), $5, $6)`
)

// ReplayDeadLetter enqueues a fresh job from the letter (same task, queue,
// args and kwargs unless edited; attempts reset; replay_of set), marks the
// letter replayed and writes the audit entry, all in one transaction. A
// letter already replayed or discarded yields a *StateError.
func (s *Store) ReplayDeadLetter(ctx context.Context, p dlq.ReplayParams) (dlq.ReplayResult, error) {
	if err := p.Target.Validate(p.Now); err != nil {
		return dlq.ReplayResult{}, err
	}
	var res dlq.ReplayResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		action := dlq.ActionReplay
		if p.Args != nil || p.Kwargs != nil {
			action = dlq.ActionEditReplay
		}
		hash := dlq.RequestHash(action, p.ID, audit.CanonJSON(p.Args), audit.CanonJSON(p.Kwargs), p.Reason, p.Target)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, action, hash, &res, func() error {
			var err error
			res, err = s.replayInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

// replayInTx is ReplayDeadLetter's work inside tx: claim the pending
// letter, enqueue its replay with the args it runs with, and audit it (as
// an edit and replay when the args changed). A letter of a source that
// runs its own jobs is replayed there (replayInSource).
func (s *Store) replayInTx(ctx context.Context, tx *sqlx.Tx, p dlq.ReplayParams) (dlq.ReplayResult, error) {
	l, src, err := claimForReplay(ctx, tx, p.ID)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	if src != nil {
		return s.replayInSource(ctx, tx, p, l, *src)
	}
	args, kwargs, edited, err := replayPayload(p, l)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	jobID, err := enqueueReplay(ctx, tx, l, args, kwargs, p)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	auditID, err := auditReplay(ctx, tx, p, l, "replayed", map[string]any{"replay_job_id": jobID, "task": l.Task}, edited, args, kwargs)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	return dlq.ReplayResult{JobID: jobID, AuditID: auditID}, nil
}

// auditReplay appends the audit entry of l's replay, counted as counted,
// with details: an edit and replay, with the arguments before and after,
// when edited.
func auditReplay(ctx context.Context, tx *sqlx.Tx, p dlq.ReplayParams, l dlq.DeadLetter, counted string, details map[string]any,
	edited bool, args, kwargs json.RawMessage) (int64, error) {
	p.Target.Details(details)
	action := dlq.ActionReplay
	if edited {
		action = dlq.ActionEditReplay
		details["before"] = map[string]json.RawMessage{"args": l.Args, "kwargs": l.Kwargs}
		details["after"] = map[string]json.RawMessage{"args": args, "kwargs": kwargs}
	}
	id := l.ID
	return audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: action, DeadLetterID: &id,
		Counts: audit.MustJSON(map[string]int{counted: 1}), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(details),
	})
}

// claimForReplay reads the letter id and claims it for a replay; a letter
// that is not pending cannot be replayed. It returns the letter's source
// when another system sent it, nil for Redrive's own.
func claimForReplay(ctx context.Context, tx *sqlx.Tx, id int64) (dlq.DeadLetter, *letterSource, error) {
	var l dlq.DeadLetter
	if err := tx.GetContext(ctx, &l, letterSQL, id); err != nil {
		return l, nil, fmt.Errorf("dead letter %d: %w", id, postgres.Translate(err))
	}
	if l.Status != dlq.StatusPending {
		return l, nil, &dlq.StateError{Letter: l, Action: "replay"}
	}
	src, err := sourceOf(ctx, tx, l.ID)
	if err != nil {
		return l, nil, err
	}
	if src != nil {
		if ok, why := src.CanReplay(); !ok {
			return l, nil, dlq.Errorf(dlq.EConflict, "dead letter %d cannot be replayed: %s", id, why)
		}
	}
	return l, src, claimLetter(ctx, tx, claimPendingSQL, l, "replay")
}

// letterSource is the source another system's letter came from, and its
// id there.
type letterSource struct {
	dlq.Source
	ExternalID string `db:"external_id"`
}

// sourceOf returns the source of the letter id when another system sent
// it, nil for Redrive's own.
func sourceOf(ctx context.Context, tx *sqlx.Tx, id int64) (*letterSource, error) {
	var src letterSource
	err := tx.GetContext(ctx, &src, `SELECT s.name, s.kind, s.replay_url, l.external_id FROM letter_sources l JOIN sources s ON s.name = l.source
		WHERE l.dead_letter_id = $1`, id)
	switch err := postgres.Translate(err); {
	case errors.Is(err, dlq.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("dead letter %d: source: %w", id, err)
	}
	return &src, nil
}

// replayInSource replays the claimed letter l of src in src itself: its
// job runs again there, under its own id (River's JobRetry), with the
// arguments the source keeps, so an edit is refused. The call to the
// source is made while the letter is claimed: a replay racing it waits,
// and a failed call leaves the letter pending.
func (s *Store) replayInSource(ctx context.Context, tx *sqlx.Tx, p dlq.ReplayParams, l dlq.DeadLetter, src letterSource) (dlq.ReplayResult, error) {
	if !p.Target.OnlyStart() {
		return dlq.ReplayResult{}, dlq.Errorf(dlq.EConflict,
			"dead letter %d is a job of %s, which runs it again in its own queue with its own attempts: replay it without another queue or attempts", l.ID, src.Name)
	}
	if src.Kind.TakesItsReplays() {
		return s.queueForSource(ctx, tx, p, l, src)
	}
	if p.Args != nil || p.Kwargs != nil {
		return dlq.ReplayResult{}, dlq.Errorf(dlq.EConflict,
			"dead letter %d is a job of %s, which runs it again with the arguments it keeps: replay it without editing them", l.ID, src.Name)
	}
	sender := s.sources[src.Name]
	if sender == nil {
		return dlq.ReplayResult{}, dlq.Errorf(dlq.EConflict,
			"dead letter %d came from %s, which this console is not configured to reach (REDRIVE_SOURCES)", l.ID, src.Name)
	}
	var jobID int64
	retrier, retries := sender.(dlq.Retrier)
	if retries && p.Target.StartAt.IsZero() {
		// Retried now, in the request: the operator sees River's answer.
		id, err := retrier.Retry(ctx, src.ExternalID)
		if err != nil {
			return dlq.ReplayResult{}, fmt.Errorf("dead letter %d: %w", l.ID, err)
		}
		jobID = id
		if _, err := tx.ExecContext(ctx, recordSentSQL, l.ID, src.Name, src.ExternalID, jobID); err != nil {
			return dlq.ReplayResult{}, fmt.Errorf("dead letter %d: follow the replay: %w", l.ID, err)
		}
	} else if _, err := tx.ExecContext(ctx, queueReplaySQL, l.ID, src.Name, src.ExternalID, nullTime(p.Target.StartAt), nil, nil); err != nil {
		// Queued, sent within a moment (or at its start time) and tried
		// again until the endpoint takes it: a webhook's answer may take
		// seconds, or never come. A River job to retry later waits here
		// too, and is retried when it is due.
		return dlq.ReplayResult{}, fmt.Errorf("dead letter %d: queue the replay: %w", l.ID, err)
	}
	if _, err := tx.ExecContext(ctx, insertReplayedSQL, l.ID, l.FailedAt, l.Task, l.Queue, p.Actor.Name, nullID(jobID)); err != nil {
		return dlq.ReplayResult{}, fmt.Errorf("dead letter %d: record the replay: %w", l.ID, postgres.Translate(err))
	}
	details := map[string]any{"source": src.Name, "task": l.Task}
	switch {
	case jobID != 0:
		details["source_job_id"] = jobID
	case !retries:
		details["sent_to"] = "replay endpoint"
	}
	auditID, err := auditReplay(ctx, tx, p, l, "replayed_in_source", details, false, nil, nil)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	return dlq.ReplayResult{JobID: jobID, Source: src.Name, AuditID: auditID}, nil
}

// queueForSource queues the replay of the claimed letter l for src, a
// source whose workers take their replays from Redrive (Celery), with
// edited arguments when p brings some; it is audited as a replay, or an
// edit and replay.
func (s *Store) queueForSource(ctx context.Context, tx *sqlx.Tx, p dlq.ReplayParams, l dlq.DeadLetter, src letterSource) (dlq.ReplayResult, error) {
	args, kwargs, edited, err := replayPayload(p, l)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	var editedArgs, editedKwargs []byte
	if edited {
		editedArgs, editedKwargs = args, kwargs
	}
	if _, err := tx.ExecContext(ctx, queueReplaySQL, l.ID, src.Name, src.ExternalID, nullTime(p.Target.StartAt), editedArgs, editedKwargs); err != nil {
		return dlq.ReplayResult{}, fmt.Errorf("dead letter %d: queue the replay: %w", l.ID, postgres.Translate(err))
	}
	if _, err := tx.ExecContext(ctx, insertReplayedSQL, l.ID, l.FailedAt, l.Task, l.Queue, p.Actor.Name, nil); err != nil {
		return dlq.ReplayResult{}, fmt.Errorf("dead letter %d: record the replay: %w", l.ID, postgres.Translate(err))
	}
	auditID, err := auditReplay(ctx, tx, p, l, "replayed_in_source",
		map[string]any{"source": src.Name, "task": l.Task, "sent_to": "its workers"}, edited, args, kwargs)
	if err != nil {
		return dlq.ReplayResult{}, err
	}
	return dlq.ReplayResult{Source: src.Name, AuditID: auditID}, nil
}

// replayPayload is the args and kwargs a replay of l runs with: the
// letter's, or the edited ones p sends where they differ; edited reports
// whether any did.
func replayPayload(p dlq.ReplayParams, l dlq.DeadLetter) (args, kwargs json.RawMessage, edited bool, err error) {
	args, argsEdited, err := editedField(p.Args, l.Args, "args")
	if err != nil {
		return nil, nil, false, err
	}
	kwargs, kwargsEdited, err := editedField(p.Kwargs, l.Kwargs, "kwargs")
	if err != nil {
		return nil, nil, false, err
	}
	return args, kwargs, argsEdited || kwargsEdited, nil
}

// editedField is the value of one field of the replay: stored, unless
// sent (not nil) and different from it.
func editedField(sent, stored json.RawMessage, field string) (json.RawMessage, bool, error) {
	if sent == nil {
		return stored, false, nil
	}
	// What an editor showed was masked (mask.Policy); what it sends back may
	// still hold placeholders, which stand for the stored values.
	sent, err := letters.RestoreMasked(sent, stored, field)
	if err != nil {
		return nil, false, err
	}
	if jsonEqual(sent, stored) {
		return stored, false, nil
	}
	return sent, true, nil
}

// enqueueReplay enqueues the replay of l and records the letter replayed
// by it, returning the job's id.
func enqueueReplay(ctx context.Context, tx *sqlx.Tx, l dlq.DeadLetter, args, kwargs json.RawMessage, p dlq.ReplayParams) (int64, error) {
	id := l.ID
	q, attempts := cmp.Or(p.Target.Queue, l.Queue), cmp.Or(p.Target.MaxAttempts, l.MaxAttempts)
	enq, err := queue.Enqueue(ctx, tx, dlq.EnqueueParams{
		Task: l.Task, Queue: q, Args: args, Kwargs: kwargs,
		MaxAttempts: attempts, RunAt: p.Target.StartAt, ReplayOf: &id,
	})
	if err != nil {
		return 0, fmt.Errorf("replay dead letter %d: %w", l.ID, err)
	}
	if _, err := tx.ExecContext(ctx, insertReplayedSQL, l.ID, l.FailedAt, l.Task, l.Queue, p.Actor.Name, enq.Job.ID); err != nil {
		return 0, fmt.Errorf("replay dead letter %d: %w", l.ID, postgres.Translate(err))
	}
	return enq.Job.ID, nil
}

// DiscardDeadLetter marks a pending letter discarded with a reason and
// audits it in one transaction.
func (s *Store) DiscardDeadLetter(ctx context.Context, p dlq.DiscardParams) (int64, error) {
	if p.Reason == "" {
		return 0, &dlq.ValidationError{Fields: map[string]string{"reason": "a reason is required to discard"}}
	}
	hash := dlq.RequestHash(dlq.ActionDiscard, p.ID, p.Reason)
	return s.changeLetter(ctx, p.ID, p.Key, "discard", hash, func(tx *sqlx.Tx, l dlq.DeadLetter) (dlq.AuditEntry, error) {
		if l.Status != dlq.StatusPending {
			return dlq.AuditEntry{}, &dlq.StateError{Letter: l, Action: "discard"}
		}
		if err := claimLetter(ctx, tx, claimPendingSQL, l, "discard"); err != nil {
			return dlq.AuditEntry{}, err
		}
		if _, err := tx.ExecContext(ctx, insertDiscardedSQL, l.ID, l.FailedAt, l.Task, l.Queue, p.Actor.Name, p.Reason); err != nil {
			return dlq.AuditEntry{}, fmt.Errorf("discard dead letter %d: %w", l.ID, postgres.Translate(err))
		}
		details := map[string]string{"task": l.Task}
		if p.DeleteInSource {
			source, err := s.deleteInSource(ctx, tx, l.ID)
			if err != nil {
				return dlq.AuditEntry{}, err
			}
			details["deleted_in_source"] = source
		}
		return dlq.AuditEntry{At: p.Now, Action: dlq.ActionDiscard, Reason: p.Reason,
			Counts: audit.MustJSON(map[string]int{"discarded": 1}), Details: audit.MustJSON(details)}, nil
	}, p.Actor)
}

// deleteInSource deletes the job of the claimed letter id in the source it
// came from, and returns the source's name. It runs while the letter is
// claimed: a failed deletion leaves the letter pending and the job where
// it was.
func (s *Store) deleteInSource(ctx context.Context, tx *sqlx.Tx, id int64) (string, error) {
	src, err := sourceOf(ctx, tx, id)
	if err != nil {
		return "", err
	}
	if src == nil {
		return "", &dlq.ValidationError{Fields: map[string]string{"delete_in_source": fmt.Sprintf(
			"dead letter %d is Redrive's own: it has no job in another system to delete", id)}}
	}
	deleter, ok := s.sources[src.Name].(dlq.Deleter)
	if !ok {
		return "", dlq.Errorf(dlq.EConflict, "dead letter %d came from %s, whose jobs this console cannot delete", id, src.Name)
	}
	if err := deleter.Delete(ctx, src.ExternalID); err != nil {
		return "", fmt.Errorf("dead letter %d: %w", id, err)
	}
	return src.Name, nil
}

// claimDiscardedSQL is the guard of a restore: it deletes the letter's
// outcome if it is a discard, so of two restores only one goes on.
const claimDiscardedSQL = `
DELETE FROM dead_letter_outcomes WHERE dead_letter_id = $1 AND failed_at = $2 AND discarded_at IS NOT NULL`

// pendingAgainSQL makes a restored letter pending again.
const pendingAgainSQL = `
INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM dead_letter_records WHERE id = $1`

// RestoreDeadLetter undoes a discard and audits it in one transaction.
func (s *Store) RestoreDeadLetter(ctx context.Context, p dlq.RestoreParams) (int64, error) {
	hash := dlq.RequestHash(dlq.ActionRestore, p.ID, p.Reason)
	return s.changeLetter(ctx, p.ID, p.Key, "restore", hash, func(tx *sqlx.Tx, l dlq.DeadLetter) (dlq.AuditEntry, error) {
		if l.Status != dlq.StatusDiscarded {
			return dlq.AuditEntry{}, &dlq.StateError{Letter: l, Action: "restore"}
		}
		if err := claimLetter(ctx, tx, claimDiscardedSQL, l, "restore", l.FailedAt); err != nil {
			return dlq.AuditEntry{}, err
		}
		if _, err := tx.ExecContext(ctx, pendingAgainSQL, l.ID); err != nil {
			return dlq.AuditEntry{}, fmt.Errorf("restore dead letter %d: %w", l.ID, postgres.Translate(err))
		}
		return dlq.AuditEntry{At: p.Now, Action: dlq.ActionRestore, Reason: p.Reason,
			Counts:  audit.MustJSON(map[string]int{"restored": 1}),
			Details: audit.MustJSON(map[string]any{"task": l.Task, "was_discarded_by": l.DiscardedBy, "discard_reason": l.DiscardReason})}, nil
	}, p.Actor)
}

// changeLetter locks one letter, lets change apply its guarded update and
// describe it, then appends the audit entry — one transaction. hash is the
// request's digest, which key is bound to.
func (s *Store) changeLetter(ctx context.Context, id int64, key, action, hash string,
	change func(*sqlx.Tx, dlq.DeadLetter) (dlq.AuditEntry, error), actor dlq.Actor) (int64, error) {
	var out struct {
		AuditID int64 `json:"audit_event_id"`
	}
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		_, err := audit.OnceWithKey(ctx, tx, key, actor, action, hash, &out, func() error {
			var err error
			out.AuditID, err = changeLetterInTx(ctx, tx, id, change, actor)
			return err
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", action, err)
	}
	return out.AuditID, nil
}

func changeLetterInTx(ctx context.Context, tx *sqlx.Tx, id int64,
	change func(*sqlx.Tx, dlq.DeadLetter) (dlq.AuditEntry, error), actor dlq.Actor) (int64, error) {
	var l dlq.DeadLetter
	if err := tx.GetContext(ctx, &l, letterSQL, id); err != nil {
		return 0, fmt.Errorf("dead letter %d: %w", id, postgres.Translate(err))
	}
	entry, err := change(tx, l)
	if err != nil {
		return 0, err
	}
	entry.Actor, entry.DeadLetterID = actor.Name, &id
	entry.RequestID, entry.RemoteAddr, entry.UserAgent = actor.RequestID, actor.RemoteAddr, actor.UserAgent
	return audit.AppendAudit(ctx, tx, entry)
}

// claimLetter runs a guard that must change exactly one row of letter l
// (its id the first argument). When it changes none, another action got
// there first: the *StateError names the letter as that action left it,
// read again now that it has committed.
func claimLetter(ctx context.Context, tx *sqlx.Tx, query string, l dlq.DeadLetter, action string, args ...any) error {
	r, err := tx.ExecContext(ctx, query, append([]any{l.ID}, args...)...)
	if err != nil {
		return fmt.Errorf("%s dead letter %d: %w", action, l.ID, postgres.Translate(err))
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return nil
	}
	var now dlq.DeadLetter
	if err := tx.GetContext(ctx, &now, letterSQL, l.ID); err != nil {
		return fmt.Errorf("dead letter %d: %w", l.ID, postgres.Translate(err))
	}
	return &dlq.StateError{Letter: now, Action: action}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
