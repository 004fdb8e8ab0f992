package queue

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

const pauseColumns = `id, kind, name, reason, paused_by, paused_at, until, resumed_at, resumed_by, expired`

// wakeWorkersSQL tells every registered worker's queues, and the paused
// queue itself, that work may have changed. A resumed task's jobs can be on
// any queue, and the worker's listener wakes only for its own queues'
// names; the workers table lists them. A pause needs no wake-up to take
// effect (the claim reads the pauses table), but idle workers claiming
// once more on a pause costs nothing and keeps one code path.
const wakeWorkersSQL = `
SELECT count(*) FROM (
	SELECT pg_notify('redrive_jobs', q)
	FROM (SELECT unnest(queues) AS q FROM workers UNION SELECT $1::text WHERE $1::text <> '') queues
) notified`

const insertPauseSQL = `
INSERT INTO pauses (kind, name, reason, paused_by, until) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (kind, name) WHERE resumed_at IS NULL DO NOTHING
RETURNING ` + pauseColumns

const openPauseOfSQL = `SELECT ` + pauseColumns + ` FROM pauses WHERE kind = $1 AND name = $2 AND resumed_at IS NULL`

// PauseWork opens a pause and audits it in one transaction. A queue or task
// already paused is a *PauseConflictError naming the open pause: pausing
// again would change who paused it, why and until when behind the first
// pauser's back. A pause that has expired but was not yet recorded as such
// is closed first, so it does not stand in the way.
func (s *Store) PauseWork(ctx context.Context, p dlq.PauseParams) (dlq.PauseResult, error) {
	if problems := p.Valid(); len(problems) > 0 {
		return dlq.PauseResult{}, &dlq.ValidationError{Fields: problems}
	}
	p.Reason = strings.TrimSpace(p.Reason)
	var res dlq.PauseResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var until any
		if p.Until != nil {
			until = p.Until.UTC()
		}
		var expiry any = until
		if p.Expiry != "" {
			expiry = p.Expiry
		}
		hash := dlq.RequestHash(dlq.ActionPause, p.Kind, p.Name, p.Reason, expiry)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, dlq.ActionPause, hash, &res, func() error {
			if _, err := expirePausesInTx(ctx, tx, p.Now, "kind = $1 AND name = $2", p.Kind, p.Name); err != nil {
				return err
			}
			var paused dlq.Pause
			if err := tx.GetContext(ctx, &paused, insertPauseSQL, p.Kind, p.Name, p.Reason, p.Actor.Name, until); err != nil {
				if postgres.Translate(err) != dlq.ErrNotFound {
					return fmt.Errorf("pause %s %s: %w", p.Kind, p.Name, postgres.Translate(err))
				}
				var open dlq.Pause
				if err := tx.GetContext(ctx, &open, openPauseOfSQL, p.Kind, p.Name); err != nil {
					return fmt.Errorf("pause %s %s: %w", p.Kind, p.Name, postgres.Translate(err))
				}
				return &dlq.PauseConflictError{Pause: open}
			}
			auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionPause, Reason: p.Reason,
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(pauseDetails(paused)),
			})
			if err != nil {
				return err
			}
			if err := wakeWorkers(ctx, tx, paused); err != nil {
				return err
			}
			res = dlq.PauseResult{Pause: paused, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

const resumePauseSQL = `
UPDATE pauses SET resumed_at = now(), resumed_by = $2
WHERE id = $1 AND resumed_at IS NULL
RETURNING ` + pauseColumns

// ResumeWork ends an open pause, audits it and wakes the workers, in one
// transaction. The guard (resumed_at IS NULL) lets only one of two racing
// resumes, or a resume and an expiry, end it; the loser gets a
// *PauseConflictError saying how it ended. A pause whose until has passed
// is recorded as expired instead, and the resume is that conflict.
func (s *Store) ResumeWork(ctx context.Context, p dlq.ResumeParams) (dlq.PauseResult, error) {
	if utf8.RuneCountInString(p.Reason) > dlq.MaxPauseReason {
		return dlq.PauseResult{}, &dlq.ValidationError{Fields: map[string]string{"reason": fmt.Sprintf("at most %d characters", dlq.MaxPauseReason)}}
	}
	var res dlq.PauseResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash(dlq.ActionResume, p.ID, p.Reason)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, dlq.ActionResume, hash, &res, func() error {
			if _, err := expirePausesInTx(ctx, tx, p.Now, "id = $1", p.ID); err != nil {
				return err
			}
			var resumed dlq.Pause
			if err := tx.GetContext(ctx, &resumed, resumePauseSQL, p.ID, p.Actor.Name); err != nil {
				if postgres.Translate(err) != dlq.ErrNotFound {
					return fmt.Errorf("resume pause %d: %w", p.ID, postgres.Translate(err))
				}
				ended, err := s.pauseInTx(ctx, tx, p.ID)
				if err != nil {
					return err
				}
				return &dlq.PauseConflictError{Pause: ended, Ended: true}
			}
			auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionResume, Reason: strings.TrimSpace(p.Reason),
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(pauseDetails(resumed)),
			})
			if err != nil {
				return err
			}
			if err := wakeWorkers(ctx, tx, resumed); err != nil {
				return err
			}
			res = dlq.PauseResult{Pause: resumed, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

func (s *Store) pauseInTx(ctx context.Context, tx *sqlx.Tx, id int64) (dlq.Pause, error) {
	var p dlq.Pause
	if err := tx.GetContext(ctx, &p, `SELECT `+pauseColumns+` FROM pauses WHERE id = $1`, id); err != nil {
		return dlq.Pause{}, fmt.Errorf("pause %d: %w", id, postgres.Translate(err))
	}
	return p, nil
}

// expirePausesSQL closes the open pauses whose until has passed. The guard
// resumed_at IS NULL makes the console and every worker safe to run it at
// once: each pause is closed, and audited, by exactly one of them. The
// pause ends at its until, not when someone noticed.
const expirePausesSQL = `
UPDATE pauses SET resumed_at = until, resumed_by = '` + dlq.ExpiryActor + `', expired = true
WHERE resumed_at IS NULL AND until <= now() AND %s
RETURNING ` + pauseColumns

// ExpirePauses records the pauses whose until has passed as ended, with an
// audit entry each, and wakes the workers if there were any. It returns
// them. The claim ignores such pauses already; this is the record of it.
func (s *Store) ExpirePauses(ctx context.Context, now time.Time) ([]dlq.Pause, error) {
	var expired []dlq.Pause
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		expired, err = expirePausesInTx(ctx, tx, now, "true")
		return err
	})
	return expired, err
}

// pauseExpiry records a pause's time running out.
var pauseExpiry = holdExpiry[dlq.Pause]{what: "pauses", action: dlq.ActionPauseExpired, reason: "the pause's time ran out",
	target: func(p dlq.Pause) (string, string) { return p.Kind, p.Name }, details: pauseDetails}

func expirePausesInTx(ctx context.Context, tx *sqlx.Tx, now time.Time, where string, args ...any) ([]dlq.Pause, error) {
	return pauseExpiry.expire(ctx, tx, now, fmt.Sprintf(expirePausesSQL, where), args...)
}

func wakeWorkers(ctx context.Context, tx *sqlx.Tx, p dlq.Pause) error {
	return wakeWorkersFor(ctx, tx, p.Kind, p.Name)
}

// wakeWorkersFor wakes the workers on a change to what a queue's or a
// task's pause or throttle holds back (wakeWorkersSQL).
func wakeWorkersFor(ctx context.Context, tx *sqlx.Tx, kind, name string) error {
	queue := ""
	if kind == dlq.PauseQueue {
		queue = name
	}
	var n int64
	if err := tx.GetContext(ctx, &n, wakeWorkersSQL, queue); err != nil {
		return fmt.Errorf("wake workers: %w", postgres.Translate(err))
	}
	return nil
}

// pauseDetails is what a pause's audit entries record besides the reason.
func pauseDetails(p dlq.Pause) map[string]any {
	d := map[string]any{"pause_id": p.ID, "kind": p.Kind, "name": p.Name, p.Kind: p.Name,
		"paused_by": p.PausedBy, "paused_at": p.PausedAt.UTC().Format(time.RFC3339)}
	if p.Until != nil {
		d["until"] = p.Until.UTC().Format(time.RFC3339)
	}
	return d
}

// openPausesSQL lists the pauses open at now(), oldest first. Expired but
// unrecorded ones are left out: they hold nothing.
const openPausesSQL = `
SELECT ` + pauseColumns + ` FROM pauses
WHERE resumed_at IS NULL AND (until IS NULL OR until > now())
ORDER BY paused_at, id`

// OpenPauses lists the pauses that hold something now. It also reports
// whether an expired pause is still waiting to be recorded (ExpirePauses).
// It reads only the small pauses table: every console page calls it, for
// the banner.
func (s *Store) OpenPauses(ctx context.Context) (open []dlq.Pause, lapsed bool, err error) {
	var rows []struct {
		dlq.Pause
		Lapsed bool `db:"lapsed"`
	}
	err = s.db.SelectContext(ctx, &rows, `
		SELECT `+pauseColumns+`, until IS NOT NULL AND until <= now() AS lapsed
		FROM pauses WHERE resumed_at IS NULL ORDER BY paused_at, id`, postgres.Prepared)
	if err != nil {
		return nil, false, fmt.Errorf("open pauses: %w", postgres.Translate(err))
	}
	for _, r := range rows {
		if r.Lapsed {
			lapsed = true
			continue
		}
		open = append(open, r.Pause)
	}
	return open, lapsed, nil
}

// PausesWithBacklog lists the open pauses with the jobs each holds back.
// The counts read the held jobs through jobs_task_state_idx or
// jobs_claimable_idx: O(held jobs), for the overview and /metrics only.
func (s *Store) PausesWithBacklog(ctx context.Context) ([]dlq.ActivePause, error) {
	var out []dlq.ActivePause
	err := s.db.SelectContext(ctx, &out, `
		SELECT p.id, p.kind, p.name, p.reason, p.paused_by, p.paused_at, p.until, p.resumed_at, p.resumed_by, p.expired,
			coalesce(b.waiting, 0) AS waiting, coalesce(b.scheduled, 0) AS scheduled
		FROM (`+openPausesSQL+`) p
		CROSS JOIN LATERAL (SELECT sum(x.waiting)::bigint AS waiting, sum(x.scheduled)::bigint AS scheduled FROM (
			-- One branch per kind, each a plain equality its index serves;
			-- the other's One-Time Filter skips it.
			SELECT count(*) FILTER (WHERE j.run_at <= now()) AS waiting, count(*) FILTER (WHERE j.run_at > now()) AS scheduled
			FROM jobs j WHERE p.kind = 'task' AND j.task = p.name AND j.state IN ('available', 'retrying')
			UNION ALL
			SELECT count(*) FILTER (WHERE j.run_at <= now()), count(*) FILTER (WHERE j.run_at > now())
			FROM jobs j WHERE p.kind = 'queue' AND j.queue = p.name AND j.state IN ('available', 'retrying')
		) x) b
		ORDER BY p.paused_at, p.id`)
	if err != nil {
		return nil, fmt.Errorf("pauses with backlog: %w", postgres.Translate(err))
	}
	return out, nil
}

// RecentPauses lists the latest pauses, open or ended, newest first.
func (s *Store) RecentPauses(ctx context.Context, limit int) ([]dlq.Pause, error) {
	var out []dlq.Pause
	if err := s.db.SelectContext(ctx, &out, `SELECT `+pauseColumns+` FROM pauses ORDER BY id DESC LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("recent pauses: %w", postgres.Translate(err))
	}
	return out, nil
}

// PauseByID returns one pause.
func (s *Store) PauseByID(ctx context.Context, id int64) (dlq.Pause, error) {
	var p dlq.Pause
	if err := s.db.GetContext(ctx, &p, `SELECT `+pauseColumns+` FROM pauses WHERE id = $1`, id); err != nil {
		return dlq.Pause{}, fmt.Errorf("pause %d: %w", id, postgres.Translate(err))
	}
	return p, nil
}

// WaitingJobs counts the jobs of a queue or a task that are waiting to run
// (available or retrying, due or not), for the pause form.
func (s *Store) WaitingJobs(ctx context.Context, kind, name string) (int64, error) {
	column := "task"
	if kind == dlq.PauseQueue {
		column = "queue"
	}
	var n int64
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM jobs WHERE `+column+` = $1 AND state IN ('available', 'retrying')`, name)
	if err != nil {
		return 0, fmt.Errorf("waiting jobs of %s %s: %w", kind, name, postgres.Translate(err))
	}
	return n, nil
}

// queueWaitsSQL finds each queue with jobs waiting by skipping through
// jobs_claimable_idx (one probe per queue, not a scan of the backlog),
// then takes each queue's first due entry: the index is in run_at order.
const queueWaitsSQL = `
WITH RECURSIVE queues AS (
	(SELECT queue FROM jobs WHERE state IN ('available', 'retrying') ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM jobs j WHERE j.state IN ('available', 'retrying') AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
	FROM queues q WHERE q.queue IS NOT NULL
)
SELECT q.queue, w.run_at AS oldest
FROM queues q
CROSS JOIN LATERAL (
	SELECT run_at FROM jobs j WHERE j.queue = q.queue AND j.state IN ('available', 'retrying') AND j.run_at <= now()
	ORDER BY j.run_at, j.id LIMIT 1
) w
WHERE q.queue IS NOT NULL
ORDER BY q.queue`

// QueueWaits returns, per queue with due jobs waiting, the run_at of the
// oldest: how long it has waited. Paused work counts: a forgotten pause
// shows as an age that keeps growing.
func (s *Store) QueueWaits(ctx context.Context) ([]dlq.QueueWait, error) {
	var out []dlq.QueueWait
	if err := s.db.SelectContext(ctx, &out, queueWaitsSQL); err != nil {
		return nil, fmt.Errorf("queue waits: %w", postgres.Translate(err))
	}
	return out, nil
}
