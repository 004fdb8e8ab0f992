package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// Schedules: the periodic jobs workers register (migrations/00115_periodic.sql).

const scheduleColumns = `name, cron, every_ms, timezone, task, queue, args, kwargs, max_attempts, next_run_at,
	enabled, changed_by, changed_at, change_reason, registered_at, last_seen_at`

// registerScheduleSQL upserts a worker's schedule. The definition is the
// code's, so the last worker to start wins it; next_run_at is the fleet's
// and is kept while the timing (cron, interval, timezone) is unchanged,
// so that a worker starting mid-period neither repeats nor skips the
// occurrence the others are waiting for. RETURNING it tells the worker
// where the fleet stands, including an occurrence that passed while no
// worker ran, which the worker then makes up.
const registerScheduleSQL = `
INSERT INTO schedules (name, cron, every_ms, timezone, task, queue, args, kwargs, max_attempts, next_run_at)
VALUES ($1, NULLIF($2, ''), NULLIF($3::bigint, 0), $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (name) DO UPDATE SET
	cron = EXCLUDED.cron, every_ms = EXCLUDED.every_ms, timezone = EXCLUDED.timezone,
	task = EXCLUDED.task, queue = EXCLUDED.queue, args = EXCLUDED.args, kwargs = EXCLUDED.kwargs,
	max_attempts = EXCLUDED.max_attempts, last_seen_at = now(),
	next_run_at = CASE
		WHEN (schedules.cron, schedules.every_ms, schedules.timezone)
			IS NOT DISTINCT FROM (EXCLUDED.cron, EXCLUDED.every_ms, EXCLUDED.timezone)
		THEN schedules.next_run_at ELSE EXCLUDED.next_run_at END
RETURNING next_run_at`

// RegisterSchedules records a starting worker's schedules and returns each
// one's next run as the database holds it, by name. One transaction, in
// name order, so two workers starting together never deadlock.
func (s *Store) RegisterSchedules(ctx context.Context, defs []dlq.ScheduleDefinition) (map[string]time.Time, error) {
	defs = slices.Clone(defs)
	slices.SortFunc(defs, func(a, b dlq.ScheduleDefinition) int { return strings.Compare(a.Name, b.Name) })
	next := make(map[string]time.Time, len(defs))
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		for _, d := range defs {
			var at time.Time
			if err := tx.GetContext(ctx, &at, registerScheduleSQL, d.Name, d.Cron, d.Every.Milliseconds(), d.Timezone,
				d.Task, d.Queue, []byte(d.Args), []byte(d.Kwargs), d.MaxAttempts, d.NextRunAt.UTC()); err != nil {
				return fmt.Errorf("schedule %s: %w", d.Name, postgres.Translate(err))
			}
			next[d.Name] = at
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("register schedules: %w", err)
	}
	return next, nil
}

// enqueueOccurrenceSQL enqueues one occurrence of a schedule, in one
// statement, whichever of many workers gets there first:
//
//   - due moves the schedule's next run on from the occurrence. Its guard,
//     next_run_at <= the occurrence, lets one worker through: the others
//     wait on the row's lock, then find next_run_at moved past it and take
//     nothing. It moves on a disabled schedule too, so that enabling it
//     again makes up nothing.
//   - job inserts the job when the schedule is enabled, under the
//     occurrence's idempotency key: a second insert of the same occurrence
//     (a worker whose definition differs, say) does nothing.
//   - run records the occurrence for the console, and trimmed keeps the
//     schedule's newest 100 runs (one range of the primary key).
const enqueueOccurrenceSQL = `
WITH due AS (
	UPDATE schedules SET next_run_at = $3, last_seen_at = now()
	WHERE name = $1 AND next_run_at <= $2
	RETURNING enabled, task, queue, args, kwargs, max_attempts
), job AS (
	INSERT INTO jobs (queue, task, args, kwargs, idempotency_key, max_attempts)
	SELECT queue, task, args, kwargs, $4, max_attempts FROM due WHERE enabled
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING id
), run AS (
	INSERT INTO schedule_runs (schedule, occurrence_at, job_id)
	SELECT $1, $2, id FROM job
	ON CONFLICT (schedule, occurrence_at) DO NOTHING
	RETURNING job_id
), trimmed AS (
	DELETE FROM schedule_runs
	WHERE schedule = $1 AND occurrence_at < (
		SELECT occurrence_at FROM schedule_runs WHERE schedule = $1
		ORDER BY occurrence_at DESC OFFSET 99 LIMIT 1)
)
SELECT EXISTS (SELECT 1 FROM due) AS taken,
	coalesce((SELECT enabled FROM due), false) AS enabled,
	coalesce((SELECT job_id FROM run), 0) AS job_id`

// Occurrence is what EnqueueOccurrence did.
type Occurrence struct {
	// Taken: this call moved the schedule on; false when another worker
	// had already taken the occurrence (or a later one).
	Taken bool `db:"taken"`
	// Enabled: the schedule was enabled when taken.
	Enabled bool `db:"enabled"`
	// JobID is the job enqueued; 0 when none was.
	JobID int64 `db:"job_id"`
}

// EnqueueOccurrence enqueues the occurrence at of the named schedule,
// unless another worker already did or the schedule is disabled, and moves
// its next run to next (see enqueueOccurrenceSQL).
func (s *Store) EnqueueOccurrence(ctx context.Context, name string, at, next time.Time) (Occurrence, error) {
	var o Occurrence
	if err := s.db.GetContext(ctx, &o, enqueueOccurrenceSQL, name, at.UTC(), next.UTC(), dlq.ScheduleKey(name, at)); err != nil {
		return Occurrence{}, fmt.Errorf("enqueue occurrence of schedule %s at %s: %w", name, at.UTC().Format(time.RFC3339), postgres.Translate(err))
	}
	return o, nil
}

const schedulesSQL = `SELECT ` + scheduleColumns + ` FROM schedules ORDER BY name`

// scheduleRunsSQL reads the newest runs of the schedules named in $1, what
// became of each job, and the letter it became if it died.
const scheduleRunsSQL = `
SELECT r.schedule, r.occurrence_at, r.job_id, r.enqueued_at, coalesce(j.state, '') AS state, d.id AS dead_letter_id
FROM unnest($1::text[]) AS s(name)
CROSS JOIN LATERAL (
	SELECT * FROM schedule_runs r WHERE r.schedule = s.name ORDER BY r.occurrence_at DESC LIMIT $2
) r
LEFT JOIN jobs j ON j.id = r.job_id
LEFT JOIN dead_letter_records d ON d.job_id = r.job_id
ORDER BY r.schedule, r.occurrence_at DESC`

// Schedules lists every registered schedule by name, each with its
// newest runs (dlq.ScheduleRunsShown).
func (s *Store) Schedules(ctx context.Context) ([]dlq.Schedule, error) {
	var list []dlq.Schedule
	if err := s.db.SelectContext(ctx, &list, schedulesSQL); err != nil {
		return nil, fmt.Errorf("list schedules: %w", postgres.Translate(err))
	}
	if err := s.attachRuns(ctx, list); err != nil {
		return nil, err
	}
	return list, nil
}

func (s *Store) attachRuns(ctx context.Context, list []dlq.Schedule) error {
	if len(list) == 0 {
		return nil
	}
	names := make([]string, len(list))
	byName := make(map[string]*dlq.Schedule, len(list))
	for i := range list {
		names[i] = list[i].Name
		byName[list[i].Name] = &list[i]
		list[i].Runs = []dlq.ScheduleRun{}
	}
	var runs []dlq.ScheduleRun
	if err := s.db.SelectContext(ctx, &runs, scheduleRunsSQL, pq.Array(names), dlq.ScheduleRunsShown); err != nil {
		return fmt.Errorf("list schedule runs: %w", postgres.Translate(err))
	}
	for _, r := range runs {
		sc := byName[r.Schedule]
		sc.Runs = append(sc.Runs, r)
	}
	return nil
}

const setScheduleEnabledSQL = `
UPDATE schedules SET enabled = $2, changed_by = $3, changed_at = now(), change_reason = $4
WHERE name = $1 AND enabled <> $2
RETURNING ` + scheduleColumns

const scheduleSQL = `SELECT ` + scheduleColumns + ` FROM schedules WHERE name = $1`

// SetScheduleEnabled disables or enables a schedule and audits it, in one
// transaction. The guard (enabled <> the wish) lets one of two racing
// changes through; the other, like a change to what the schedule already
// is, is a conflict that says who made it so and why. Workers read
// enabled in the statement that enqueues each occurrence, so a disable
// holds from its commit on: an occurrence already enqueued still runs.
func (s *Store) SetScheduleEnabled(ctx context.Context, p dlq.ScheduleChangeParams) (dlq.ScheduleChangeResult, error) {
	if problems := p.Valid(); len(problems) > 0 {
		return dlq.ScheduleChangeResult{}, &dlq.ValidationError{Fields: problems}
	}
	p.Reason = strings.TrimSpace(p.Reason)
	action := dlq.ActionScheduleDisable
	if p.Enabled {
		action = dlq.ActionScheduleEnable
	}
	var res dlq.ScheduleChangeResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash(action, p.Name, p.Reason)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, action, hash, &res, func() error {
			var sc dlq.Schedule
			if err := tx.GetContext(ctx, &sc, setScheduleEnabledSQL, p.Name, p.Enabled, p.Actor.Name, p.Reason); err != nil {
				if postgres.Translate(err) != dlq.ErrNotFound {
					return fmt.Errorf("%s: %w", action, postgres.Translate(err))
				}
				return scheduleUnchanged(ctx, tx, p)
			}
			auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: action, Reason: p.Reason,
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(map[string]any{"kind": "schedule", "name": sc.Name, "schedule": sc.Name,
					"task": sc.Task, "queue": sc.Queue, "when": sc.When(), "enabled": sc.Enabled}),
			})
			if err != nil {
				return err
			}
			res = dlq.ScheduleChangeResult{Schedule: sc, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return dlq.ScheduleChangeResult{}, err
	}
	if err := s.attachRuns(ctx, []dlq.Schedule{res.Schedule}); err != nil {
		return dlq.ScheduleChangeResult{}, err
	}
	return res, nil
}

// scheduleUnchanged says why a change matched no row: no such schedule
// (not found), or it already is what was asked (a conflict naming who
// made it so).
func scheduleUnchanged(ctx context.Context, tx *sqlx.Tx, p dlq.ScheduleChangeParams) error {
	var sc dlq.Schedule
	if err := tx.GetContext(ctx, &sc, scheduleSQL, p.Name); err != nil {
		if postgres.Translate(err) == dlq.ErrNotFound {
			return dlq.Errorf(dlq.ENotFound, "No schedule is named %q: workers register schedules as they start", p.Name)
		}
		return fmt.Errorf("read schedule %s: %w", p.Name, postgres.Translate(err))
	}
	state := "disabled"
	if sc.Enabled {
		state = "enabled"
	}
	msg := fmt.Sprintf("Schedule %s is already %s", sc.Name, state)
	if sc.ChangedBy != nil && sc.ChangedAt != nil {
		msg += fmt.Sprintf(" (by %s at %s UTC", *sc.ChangedBy, sc.ChangedAt.UTC().Format("2006-01-02 15:04"))
		if sc.ChangeReason != nil {
			msg += fmt.Sprintf(": %q", *sc.ChangeReason)
		}
		msg += ")"
	}
	return dlq.Errorf(dlq.EConflict, "%s", msg)
}
