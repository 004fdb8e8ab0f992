package operations

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// Replays in other systems (migrations/00111_source_replays.sql says why
// they are queued): a bulk batch queues them, SendSourceReplays sends the
// due ones to their source, and FollowSourceReplays reads where they are
// there until they settle.

// ActionReplayRefused is the audit action of a queued replay its source
// would not run: the letter is pending again.
const ActionReplayRefused = "replay_refused"

const (
	// sendBatch is how many due replays one pass takes from a source, and
	// sendLease how long the runner holds them: one that stopped mid-send
	// leaves them to another, resumed, after it. A webhook may take its
	// client's 10 s timeout to answer, so a batch sent one by one takes up
	// to 200 s, well within its lease.
	sendBatch = 20
	sendLease = 5 * time.Minute
	// followBatch is how many sent replays one read of a source asks about.
	followBatch = 1000
	// maxSendBackoff bounds the wait before a failed send is tried again.
	maxSendBackoff = 5 * time.Minute
)

// dueReplaysSQL picks up to $2 of source $1's replays due now, skipping
// those another runner holds: waiting ones at their time, and sending ones
// whose lease ran out (resumed).
const dueReplaysSQL = `
	SELECT id, state = 'sending' AS resumed FROM source_replays
	WHERE source = $1 AND state IN ('waiting', 'sending') AND run_at <= now() AND coalesce(leased_until, run_at) <= now()
	ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED`

// takeDueSQL leases up to $2 of source $1's due replays to this runner
// for $3 seconds. A replay still leased as sending once its lease ran out
// was cut short: it is taken again, resumed.
const takeDueSQL = `
UPDATE source_replays r SET state = 'sending', leased_until = now() + $3 * interval '1 second'
FROM (` + dueReplaysSQL + `
) due
WHERE r.id = due.id
RETURNING r.id, r.dead_letter_id, r.operation_id, r.source, r.external_id, coalesce(r.job_id, 0) AS job_id, r.tries, due.resumed`

// SendSourceReplays sends every due queued replay to its source, a batch
// at a time, until none is due; it returns how many it sent. Each source
// is sent to on its own, so that a slow webhook holds up only its own
// replays.
func (s *Store) SendSourceReplays(ctx context.Context) (int, error) {
	var sent atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for name, sender := range s.sources {
		g.Go(func() error {
			for {
				n, taken, err := s.sendDue(ctx, name, sender)
				sent.Add(int64(n))
				if err != nil {
					return fmt.Errorf("send replays to %s: %w", name, err)
				}
				if taken < sendBatch {
					return nil
				}
			}
		})
	}
	err := g.Wait()
	return int(sent.Load()), err
}

// sendOutcome is what became of one send.
type sendOutcome struct {
	replay dlq.SourceReplay
	sent   dlq.SentReplay
	err    error
}

// sendDue leases source's due replays, sends each, and records what became
// of them. It returns how many were sent and how many it took.
func (s *Store) sendDue(ctx context.Context, source string, sender dlq.ReplaySender) (sent, taken int, err error) {
	var due []dlq.SourceReplay
	if err := s.db.SelectContext(ctx, &due, takeDueSQL, source, sendBatch, sendLease.Seconds()); err != nil {
		return 0, 0, fmt.Errorf("take due replays: %w", err)
	}
	outcomes := make([]sendOutcome, 0, len(due))
	for _, r := range due {
		sent, err := sender.SendReplay(ctx, r)
		if ctx.Err() != nil {
			// Stopping: what was not recorded is resumed after the lease.
			break
		}
		outcomes = append(outcomes, sendOutcome{replay: r, sent: sent, err: err})
	}
	for _, o := range outcomes {
		if err := s.recordSend(ctx, o); err != nil {
			return sent, len(due), err
		}
		if o.err == nil {
			sent++
		}
	}
	return sent, len(due), nil
}

// recordSend records one send in its own transaction: sent, with its job
// id (on the letter's outcome too); refused, making the letter pending
// again and auditing why; or failed, to be tried again after a backoff.
func (s *Store) recordSend(ctx context.Context, o sendOutcome) error {
	r := o.replay
	return postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		switch {
		case o.err == nil:
			return recordSent(ctx, tx, r, o.sent)
		case dlq.ErrorCode(o.err) == dlq.EConflict:
			return recordRefused(ctx, tx, r, o.err.Error())
		}
		wait := sendBackoff(r.Tries)
		_, err := tx.ExecContext(ctx, `UPDATE source_replays SET state = 'waiting', tries = tries + 1, problem = $2,
			run_at = now() + $3 * interval '1 second', leased_until = NULL WHERE id = $1 AND state = 'sending'`, r.ID, o.err.Error(), wait.Seconds())
		if err != nil {
			return fmt.Errorf("replay %d: record a failed send: %w", r.ID, err)
		}
		return nil
	})
}

// sendBackoff is the wait before the next try of a send that failed tries
// times before: doubling from a second, with jitter, up to maxSendBackoff.
func sendBackoff(tries int) time.Duration {
	wait := min(time.Second<<min(tries, 20), maxSendBackoff)
	return wait/2 + rand.N(wait/2+1)
}

func recordSent(ctx context.Context, tx *sqlx.Tx, r dlq.SourceReplay, sent dlq.SentReplay) error {
	jobID := sent.JobID
	// A system that ran the replay at once may have reported its outcome
	// before its answer is recorded here: the outcome stays, and the
	// answer and the job it names are kept beside it.
	res, err := tx.ExecContext(ctx, `UPDATE source_replays SET state = CASE WHEN state = 'sending' THEN 'sent' ELSE state END,
			job_id = coalesce(nullif($2, 0), job_id), tries = tries + 1, problem = NULL, answer = coalesce(nullif($3, ''), answer),
			sent_at = coalesce(sent_at, now()), leased_until = NULL
		WHERE id = $1 AND state IN ('sending', 'running', 'succeeded', 'died_again')`, r.ID, jobID, sent.Answer)
	if err != nil {
		return fmt.Errorf("replay %d: record it sent: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 || jobID == 0 {
		return nil // recorded by another runner, after this one's lease ran out; or no job to name
	}
	if _, err := tx.ExecContext(ctx, `UPDATE dead_letter_outcomes o SET replay_job_id = $2
		FROM dead_letter_records d
		WHERE d.id = $1 AND o.failed_at = d.failed_at AND o.dead_letter_id = d.id AND o.replayed_at IS NOT NULL`,
		r.DeadLetterID, jobID); err != nil {
		return fmt.Errorf("replay %d: name its job on the letter: %w", r.ID, err)
	}
	return nil
}

// recordRefused settles a replay its source refused and makes its letter
// pending again (its replayed outcome undone), with an audit entry saying
// why: refused letters are never counted as replayed.
func recordRefused(ctx context.Context, tx *sqlx.Tx, r dlq.SourceReplay, problem string) error {
	res, err := tx.ExecContext(ctx, `UPDATE source_replays SET state = 'refused', tries = tries + 1, problem = $2,
		settled_at = now() WHERE id = $1 AND state = 'sending'`, r.ID, problem)
	if err != nil {
		return fmt.Errorf("replay %d: record it refused: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	undone, err := tx.ExecContext(ctx, `DELETE FROM dead_letter_outcomes o USING dead_letter_records d
		WHERE d.id = $1 AND o.failed_at = d.failed_at AND o.dead_letter_id = d.id AND o.replayed_at IS NOT NULL`, r.DeadLetterID)
	if err != nil {
		return fmt.Errorf("replay %d: undo the letter's replay: %w", r.ID, err)
	}
	if n, _ := undone.RowsAffected(); n == 1 {
		if _, err := tx.ExecContext(ctx, pendingAgainSQL, r.DeadLetterID); err != nil {
			return fmt.Errorf("replay %d: make the letter pending again: %w", r.ID, postgres.Translate(err))
		}
	}
	id := r.DeadLetterID
	_, err = audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: time.Now(), Actor: "system", Action: ActionReplayRefused, DeadLetterID: &id, OperationID: r.OperationID,
		Counts: audit.MustJSON(map[string]int{"refused": 1}), Reason: problem,
		Details: audit.MustJSON(map[string]any{"source": r.Source, "external_id": r.ExternalID}),
	})
	return err
}

// FollowSourceReplays reads where the sent replays of every source that
// can say (a dlq.ReplayFollower) are there, and records those that moved.
func (s *Store) FollowSourceReplays(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(s.sources)) {
		f, ok := s.sources[name].(dlq.ReplayFollower)
		if !ok {
			continue
		}
		if err := s.followSource(ctx, name, f); err != nil {
			return fmt.Errorf("follow replays in %s: %w", name, err)
		}
	}
	return nil
}

func (s *Store) followSource(ctx context.Context, source string, f dlq.ReplayFollower) error {
	var after int64
	for {
		var sent []dlq.SourceReplay
		if err := s.db.SelectContext(ctx, &sent, `SELECT id, dead_letter_id, operation_id, source, external_id,
				coalesce(job_id, 0) AS job_id, tries, false AS resumed
			FROM source_replays WHERE source = $1 AND state IN ('sent', 'running') AND id > $2
			ORDER BY id LIMIT $3`, source, after, followBatch); err != nil {
			return fmt.Errorf("sent replays: %w", err)
		}
		if len(sent) == 0 {
			return nil
		}
		states, err := f.FollowReplays(ctx, sent)
		if err != nil {
			return err
		}
		if err := recordStates(ctx, s.db, states); err != nil {
			return err
		}
		if len(sent) < followBatch {
			return nil
		}
		after = sent[len(sent)-1].ID
	}
}

// recordStates moves followed replays to the states their source reports,
// stamping those that settled.
func recordStates(ctx context.Context, db sqlx.ExecerContext, states map[int64]dlq.SourceReplayState) error {
	ids := make([]int64, 0, len(states))
	to := make([]string, 0, len(states))
	for _, id := range slices.Sorted(maps.Keys(states)) {
		st := states[id]
		if st != dlq.SourceReplaySent && st != dlq.SourceReplayRunning && !st.Settled() || st == dlq.SourceReplayRefused {
			return fmt.Errorf("replay %d: a source cannot report %q", id, st)
		}
		ids, to = append(ids, id), append(to, string(st))
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := db.ExecContext(ctx, `UPDATE source_replays r SET state = u.state,
			settled_at = CASE WHEN u.state IN ('succeeded', 'died_again', 'gone') THEN now() END
		FROM unnest($1::bigint[], $2::text[]) u(id, state)
		WHERE r.id = u.id AND r.state IN ('sent', 'running') AND r.state <> u.state`, pq.Array(ids), pq.Array(to))
	if err != nil {
		return fmt.Errorf("record replay states: %w", err)
	}
	return nil
}

// queueReplaySQL queues a single replay, due at $4 (now when NULL), with
// edited arguments when $5 and $6 are not NULL.
const queueReplaySQL = `INSERT INTO source_replays (dead_letter_id, source, external_id, run_at, args, kwargs)
VALUES ($1, $2, $3, coalesce($4, now()), $5, $6)`

// nullID is a job id as a column takes it: NULL for none.
func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// recordSentSQL records a replay sent at once (a single replay, in the
// request): followed from then on like a queued one.
const recordSentSQL = `INSERT INTO source_replays (dead_letter_id, source, external_id, state, run_at, tries, job_id, sent_at)
VALUES ($1, $2, $3, 'sent', now(), 1, nullif($4, 0), now())`

// ReportReplayOutcome records how the latest replay of a letter in another
// system went, as that system reports it (POST
// /api/v1/letters/{id}/outcome): sent (a source whose workers take their
// replays published it, JobRef naming its job there), running, or settled
// as succeeded or died again. A report may come before the send that
// delivered the replay is recorded (the endpoint ran it at once), so a
// replay still waiting or sending takes it too. The same outcome reported
// again, or one the replay is past (sent after it ran), changes nothing
// (Repeated); another settled outcome is a conflict, as is a report for a
// replay the source refused. sources, when not empty, are those the
// reporter may speak for.
func (s *Store) ReportReplayOutcome(ctx context.Context, p dlq.OutcomeReport) (dlq.OutcomeResult, error) {
	switch p.State {
	case dlq.SourceReplaySent, dlq.SourceReplayRunning, dlq.SourceReplaySucceeded, dlq.SourceReplayDiedAgain:
	default:
		return dlq.OutcomeResult{}, &dlq.ValidationError{Fields: map[string]string{
			"state": fmt.Sprintf("%q is not an outcome: sent, running, succeeded or died_again", dlq.ClipRunes(string(p.State), 40))}}
	}
	if len(p.JobRef) > dlq.MaxExternalIDLen {
		return dlq.OutcomeResult{}, &dlq.ValidationError{Fields: map[string]string{"job_ref": fmt.Sprintf("at most %d bytes", dlq.MaxExternalIDLen)}}
	}
	var res dlq.OutcomeResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var r struct {
			ID     int64                 `db:"id"`
			Source string                `db:"source"`
			State  dlq.SourceReplayState `db:"state"`
			JobRef *string               `db:"job_ref"`
		}
		err := tx.GetContext(ctx, &r, `SELECT id, source, state, job_ref FROM source_replays WHERE dead_letter_id = $1
			ORDER BY id DESC LIMIT 1 FOR UPDATE`, p.LetterID)
		if errors.Is(postgres.Translate(err), dlq.ErrNotFound) {
			return dlq.Errorf(dlq.ENotFound, "dead letter %d has no replay in another system to report on", p.LetterID)
		}
		if err != nil {
			return fmt.Errorf("replay of dead letter %d: %w", p.LetterID, err)
		}
		if len(p.Sources) > 0 && !slices.Contains(p.Sources, r.Source) {
			return dlq.Errorf(dlq.EForbidden, "dead letter %d came from %s; this token speaks for %v only", p.LetterID, r.Source, p.Sources)
		}
		res = dlq.OutcomeResult{LetterID: p.LetterID, ReplayID: r.ID, Source: r.Source, State: r.State, JobRef: deref(r.JobRef)}
		past := r.State == dlq.SourceReplayRunning || r.State.Settled() // past sent
		to := p.State
		switch {
		case r.State == dlq.SourceReplayRefused:
			return dlq.Errorf(dlq.EConflict, "the replay of dead letter %d was refused by %s: it did not run", p.LetterID, r.Source)
		case r.State == p.State, p.State == dlq.SourceReplaySent && past, p.State == dlq.SourceReplayRunning && r.State.Settled():
			res.Repeated = true // already known, or a late report of a step it is past
			to = r.State
		case r.State.Settled():
			return dlq.Errorf(dlq.EConflict, "the replay of dead letter %d was already reported as %s", p.LetterID, r.State)
		}
		if res.Repeated && (p.JobRef == "" || r.JobRef != nil) {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE source_replays SET state = $2,
				settled_at = CASE WHEN $2 IN ('succeeded', 'died_again') THEN coalesce(settled_at, now()) END,
				problem = CASE WHEN $2 = 'died_again' AND $3 <> '' THEN $3 ELSE problem END,
				job_ref = coalesce(job_ref, nullif($4, '')),
				sent_at = coalesce(sent_at, now()), leased_until = NULL
			WHERE id = $1`, r.ID, to, p.Message, p.JobRef); err != nil {
			return fmt.Errorf("record the outcome of replay %d: %w", r.ID, err)
		}
		res.State = to
		if res.JobRef == "" {
			res.JobRef = p.JobRef
		}
		return nil
	})
	return res, err
}

// takeForSourceSQL leases up to $2 of source $1's due replays to the
// worker that takes them, for $3 seconds, with what it publishes: the
// letter's task and queue, and its arguments or the edited ones.
const takeForSourceSQL = `
WITH taken AS (
	UPDATE source_replays r SET state = 'sending', leased_until = now() + $3 * interval '1 second'
	FROM (` + dueReplaysSQL + `
	) due
	WHERE r.id = due.id
	RETURNING r.id, r.dead_letter_id, r.operation_id, r.external_id, r.args, r.kwargs, due.resumed
)
SELECT t.id AS replay_id, t.dead_letter_id, t.operation_id, t.external_id, d.task, d.queue,
	coalesce(t.args, d.args) AS args, coalesce(t.kwargs, d.kwargs) AS kwargs, t.resumed
FROM taken t JOIN dead_letter_records d ON d.id = t.dead_letter_id
ORDER BY t.id`

// TakeReplays leases up to limit of source's due replays to the worker that
// asks, for lease: a Celery app's workers take their replays and publish
// them through the app's broker, then report each sent. Two workers asking
// at once take different replays; one that stops before it reports a
// replay sent leaves it to the next, as resumed, once the lease ends.
func (s *Store) TakeReplays(ctx context.Context, source string, limit int, lease time.Duration) ([]dlq.TakenReplay, error) {
	var kind dlq.SourceKind
	err := s.db.GetContext(ctx, &kind, `SELECT kind FROM sources WHERE name = $1`, source)
	switch err := postgres.Translate(err); {
	case errors.Is(err, dlq.ErrNotFound):
		return nil, dlq.Errorf(dlq.ENotFound, "there is no source %q", dlq.ClipRunes(source, 40))
	case err != nil:
		return nil, fmt.Errorf("source %s: %w", source, err)
	case !kind.TakesItsReplays():
		return nil, &dlq.ValidationError{Fields: map[string]string{"source": fmt.Sprintf(
			"%s is a source of kind %s, whose replays Redrive sends itself", source, kind)}}
	}
	out := []dlq.TakenReplay{}
	if err := s.db.SelectContext(ctx, &out, takeForSourceSQL, source, limit, lease.Seconds()); err != nil {
		return nil, fmt.Errorf("take replays of %s: %w", source, err)
	}
	return out, nil
}
