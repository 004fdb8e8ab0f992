package dlq

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
)

// Pauses hold a queue or a task during an incident. The claim skips what
// an open pause holds (claimSQL reads the pauses table itself, so a pause
// takes effect with its commit and a worker that starts later honours it);
// the held jobs keep their state, run_at and attempts, and are claimed in
// their old order once the pause ends. A pause ends when it is resumed or
// when its until passes: the claim compares until with now(), so expiry
// needs nobody to act; whoever notices first (ExpirePauses: the console's
// banner, a worker's heartbeat) records it and writes its audit entry.

// Pause kinds.
const (
	PauseQueue = "queue"
	PauseTask  = "task"
)

// Audit actions of pauses.
const (
	ActionPause        = "pause"
	ActionResume       = "resume"
	ActionPauseExpired = "pause_expired"
)

// ExpiryActor is the actor of the audit entry an expiry writes, and the
// resumed_by of an expired pause.
const ExpiryActor = "expiry"

// MaxPauseReason bounds a pause's reason; MinPauseLength and
// MaxPauseLength how near and how far ahead until may lie. The minimum
// keeps an until a moment ahead by this process's clock from being behind
// the database's, whose CHECK would refuse it in words nobody asked for.
const (
	MaxPauseReason = 1000
	MinPauseLength = time.Second
	MaxPauseLength = 30 * 24 * time.Hour
)

// Pause is one pause of a queue or a task, open or ended.
type Pause struct {
	ID        int64      `db:"id" json:"id"`
	Kind      string     `db:"kind" json:"kind"`
	Name      string     `db:"name" json:"name"`
	Reason    string     `db:"reason" json:"reason"`
	PausedBy  string     `db:"paused_by" json:"paused_by"`
	PausedAt  time.Time  `db:"paused_at" json:"paused_at"`
	Until     *time.Time `db:"until" json:"until"`
	ResumedAt *time.Time `db:"resumed_at" json:"resumed_at"`
	ResumedBy *string    `db:"resumed_by" json:"resumed_by"`
	Expired   bool       `db:"expired" json:"expired"`
}

const pauseColumns = `id, kind, name, reason, paused_by, paused_at, until, resumed_at, resumed_by, expired`

// Target names what the pause holds: "task payments.charge".
func (p Pause) Target() string { return p.Kind + " " + p.Name }

// Open reports whether the pause still holds at now.
func (p Pause) Open(now time.Time) bool {
	return p.ResumedAt == nil && (p.Until == nil || p.Until.After(now))
}

// PauseConflictError says the queue or task is already paused, or the
// pause to resume has already ended. It matches ErrConflict.
type PauseConflictError struct {
	Pause Pause
	// Ended: the pause asked to resume had already ended.
	Ended bool
}

func (e *PauseConflictError) Error() string {
	p := e.Pause
	if !e.Ended {
		return fmt.Sprintf("%s is already paused (pause %d, by %s since %s UTC: %q); resume it first to pause it anew",
			p.Target(), p.ID, p.PausedBy, p.PausedAt.UTC().Format("2006-01-02 15:04"), p.Reason)
	}
	switch {
	case p.Expired && p.Until != nil:
		return fmt.Sprintf("pause %d of %s already ended: it expired at %s UTC", p.ID, p.Target(), p.Until.UTC().Format("2006-01-02 15:04"))
	case p.ResumedAt != nil && p.ResumedBy != nil:
		return fmt.Sprintf("pause %d of %s already ended: %s resumed it at %s UTC", p.ID, p.Target(), *p.ResumedBy,
			p.ResumedAt.UTC().Format("2006-01-02 15:04"))
	default:
		return fmt.Sprintf("pause %d of %s already ended", p.ID, p.Target())
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *PauseConflictError) Is(target error) bool { return target == ErrConflict }

// As finds a PauseConflictError as an Error coded EConflict.
func (e *PauseConflictError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

// PauseParams asks for a queue or a task to be paused.
type PauseParams struct {
	Kind   string
	Name   string
	Reason string
	// Until, when set, ends the pause by itself.
	Until *time.Time
	// UntilField names the request's field Until was read from: "for" (a
	// duration) or "until" (a time; the default). A problem with Until is
	// reported under it, so the person is told about what they wrote.
	UntilField string
	Actor      Actor
	// Now is the time recorded in the audit entry, and what Until must lie
	// after.
	Now time.Time
	// Key, when set, makes the pause happen once however often it is sent.
	Key string
	// Expiry, when set, is the expiry as the request wrote it ("30m",
	// "14:30"). The key's request is then compared by it rather than by
	// Until: a duration or a time of day names a later instant on every
	// retry, which would make each retry look like another request.
	Expiry string
}

// Valid lists what is wrong with p, field by field.
func (p PauseParams) Valid() map[string]string {
	problems := map[string]string{}
	switch p.Kind {
	case PauseQueue:
		if QueueNameProblem(p.Name) != "" {
			problems["queue"] = fmt.Sprintf("a queue name: 1-%d letters, digits or . _ : -", MaxQueueNameLen)
		}
	case PauseTask:
		if TaskNameProblem(p.Name) != "" {
			problems["task"] = fmt.Sprintf("a task name: 1-%d letters, digits or . _ : -", MaxTaskNameLen)
		}
	default:
		problems["kind"] = `name either a queue ("queue") or a task ("task") to pause`
	}
	switch reason := strings.TrimSpace(p.Reason); {
	case reason == "":
		problems["reason"] = "a reason is required: say why, for whoever finds the pause"
	case utf8.RuneCountInString(reason) > MaxPauseReason:
		problems["reason"] = fmt.Sprintf("at most %d characters", MaxPauseReason)
	case strings.ContainsRune(reason, 0) || !utf8.ValidString(reason):
		problems["reason"] = "must be text (no NUL bytes, valid UTF-8)"
	}
	if p.Until != nil {
		field := "until"
		if p.UntilField == "for" {
			field = "for"
		}
		switch {
		case !p.Until.After(p.Now):
			problems[field] = fmt.Sprintf("must be in the future (it is %s UTC now)", p.Now.UTC().Format("2006-01-02 15:04"))
		case p.Until.Sub(p.Now) < MinPauseLength:
			problems[field] = "at least a second ahead: a shorter pause would end before it began"
		case p.Until.Sub(p.Now) > MaxPauseLength:
			problems[field] = "at most 30 days ahead (720h): a pause that long is better resumed by hand"
		}
	}
	return problems
}

// PauseResult is what a pause did.
type PauseResult struct {
	Pause   Pause `json:"pause"`
	AuditID int64 `json:"audit_event_id"`
	// Repeated: the key had been used; this is the first answer.
	Repeated bool `json:"-"`
}

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
func (s *Store) PauseWork(ctx context.Context, p PauseParams) (PauseResult, error) {
	if problems := p.Valid(); len(problems) > 0 {
		return PauseResult{}, &ValidationError{Fields: problems}
	}
	p.Reason = strings.TrimSpace(p.Reason)
	var res PauseResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var until any
		if p.Until != nil {
			until = p.Until.UTC()
		}
		var expiry any = until
		if p.Expiry != "" {
			expiry = p.Expiry
		}
		hash := requestHash(ActionPause, p.Kind, p.Name, p.Reason, expiry)
		repeated, err := onceWithKey(ctx, tx, p.Key, p.Actor, ActionPause, hash, &res, func() error {
			if _, err := expirePausesInTx(ctx, tx, p.Now, "kind = $1 AND name = $2", p.Kind, p.Name); err != nil {
				return err
			}
			var paused Pause
			if err := tx.GetContext(ctx, &paused, insertPauseSQL, p.Kind, p.Name, p.Reason, p.Actor.Name, until); err != nil {
				if translate(err) != ErrNotFound {
					return fmt.Errorf("pause %s %s: %w", p.Kind, p.Name, translate(err))
				}
				var open Pause
				if err := tx.GetContext(ctx, &open, openPauseOfSQL, p.Kind, p.Name); err != nil {
					return fmt.Errorf("pause %s %s: %w", p.Kind, p.Name, translate(err))
				}
				return &PauseConflictError{Pause: open}
			}
			auditID, err := appendAudit(ctx, tx, AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: ActionPause, Reason: p.Reason,
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: mustJSON(pauseDetails(paused)),
			})
			if err != nil {
				return err
			}
			if err := wakeWorkers(ctx, tx, paused); err != nil {
				return err
			}
			res = PauseResult{Pause: paused, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

// ResumeParams asks for an open pause to end.
type ResumeParams struct {
	ID     int64
	Reason string // optional
	Actor  Actor
	Now    time.Time
	Key    string
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
func (s *Store) ResumeWork(ctx context.Context, p ResumeParams) (PauseResult, error) {
	if utf8.RuneCountInString(p.Reason) > MaxPauseReason {
		return PauseResult{}, &ValidationError{Fields: map[string]string{"reason": fmt.Sprintf("at most %d characters", MaxPauseReason)}}
	}
	var res PauseResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		hash := requestHash(ActionResume, p.ID, p.Reason)
		repeated, err := onceWithKey(ctx, tx, p.Key, p.Actor, ActionResume, hash, &res, func() error {
			if _, err := expirePausesInTx(ctx, tx, p.Now, "id = $1", p.ID); err != nil {
				return err
			}
			var resumed Pause
			if err := tx.GetContext(ctx, &resumed, resumePauseSQL, p.ID, p.Actor.Name); err != nil {
				if translate(err) != ErrNotFound {
					return fmt.Errorf("resume pause %d: %w", p.ID, translate(err))
				}
				ended, err := s.pauseInTx(ctx, tx, p.ID)
				if err != nil {
					return err
				}
				return &PauseConflictError{Pause: ended, Ended: true}
			}
			auditID, err := appendAudit(ctx, tx, AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: ActionResume, Reason: strings.TrimSpace(p.Reason),
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: mustJSON(pauseDetails(resumed)),
			})
			if err != nil {
				return err
			}
			if err := wakeWorkers(ctx, tx, resumed); err != nil {
				return err
			}
			res = PauseResult{Pause: resumed, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

func (s *Store) pauseInTx(ctx context.Context, tx *sqlx.Tx, id int64) (Pause, error) {
	var p Pause
	if err := tx.GetContext(ctx, &p, `SELECT `+pauseColumns+` FROM pauses WHERE id = $1`, id); err != nil {
		return Pause{}, fmt.Errorf("pause %d: %w", id, translate(err))
	}
	return p, nil
}

// expirePausesSQL closes the open pauses whose until has passed. The guard
// resumed_at IS NULL makes the console and every worker safe to run it at
// once: each pause is closed, and audited, by exactly one of them. The
// pause ends at its until, not when someone noticed.
const expirePausesSQL = `
UPDATE pauses SET resumed_at = until, resumed_by = '` + ExpiryActor + `', expired = true
WHERE resumed_at IS NULL AND until <= now() AND %s
RETURNING ` + pauseColumns

// ExpirePauses records the pauses whose until has passed as ended, with an
// audit entry each, and wakes the workers if there were any. It returns
// them. The claim ignores such pauses already; this is the record of it.
func (s *Store) ExpirePauses(ctx context.Context, now time.Time) ([]Pause, error) {
	var expired []Pause
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		expired, err = expirePausesInTx(ctx, tx, now, "true")
		return err
	})
	return expired, err
}

func expirePausesInTx(ctx context.Context, tx *sqlx.Tx, now time.Time, where string, args ...any) ([]Pause, error) {
	var expired []Pause
	if err := tx.SelectContext(ctx, &expired, fmt.Sprintf(expirePausesSQL, where), args...); err != nil {
		return nil, fmt.Errorf("expire pauses: %w", translate(err))
	}
	for _, p := range expired {
		if _, err := appendAudit(ctx, tx, AuditEntry{
			At: now, Actor: ExpiryActor, Action: ActionPauseExpired,
			Reason:  "the pause's time ran out",
			Details: mustJSON(pauseDetails(p)),
		}); err != nil {
			return nil, err
		}
		if err := wakeWorkers(ctx, tx, p); err != nil {
			return nil, err
		}
	}
	return expired, nil
}

func wakeWorkers(ctx context.Context, tx *sqlx.Tx, p Pause) error {
	queue := ""
	if p.Kind == PauseQueue {
		queue = p.Name
	}
	var n int64
	if err := tx.GetContext(ctx, &n, wakeWorkersSQL, queue); err != nil {
		return fmt.Errorf("wake workers: %w", translate(err))
	}
	return nil
}

// pauseDetails is what a pause's audit entries record besides the reason.
func pauseDetails(p Pause) map[string]any {
	d := map[string]any{"pause_id": p.ID, "kind": p.Kind, "name": p.Name, p.Kind: p.Name,
		"paused_by": p.PausedBy, "paused_at": p.PausedAt.UTC().Format(time.RFC3339)}
	if p.Until != nil {
		d["until"] = p.Until.UTC().Format(time.RFC3339)
	}
	return d
}

// ActivePause is an open pause with the jobs waiting behind it.
type ActivePause struct {
	Pause
	// Waiting counts the held jobs that are due now; Scheduled those due
	// later (retries and scheduled jobs).
	Waiting   int64 `db:"waiting" json:"waiting"`
	Scheduled int64 `db:"scheduled" json:"scheduled"`
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
func (s *Store) OpenPauses(ctx context.Context) (open []Pause, lapsed bool, err error) {
	var rows []struct {
		Pause
		Lapsed bool `db:"lapsed"`
	}
	err = s.db.SelectContext(ctx, &rows, `
		SELECT `+pauseColumns+`, until IS NOT NULL AND until <= now() AS lapsed
		FROM pauses WHERE resumed_at IS NULL ORDER BY paused_at, id`)
	if err != nil {
		return nil, false, fmt.Errorf("open pauses: %w", translate(err))
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
func (s *Store) PausesWithBacklog(ctx context.Context) ([]ActivePause, error) {
	var out []ActivePause
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
		return nil, fmt.Errorf("pauses with backlog: %w", translate(err))
	}
	return out, nil
}

// RecentPauses lists the latest pauses, open or ended, newest first.
func (s *Store) RecentPauses(ctx context.Context, limit int) ([]Pause, error) {
	var out []Pause
	if err := s.db.SelectContext(ctx, &out, `SELECT `+pauseColumns+` FROM pauses ORDER BY id DESC LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("recent pauses: %w", translate(err))
	}
	return out, nil
}

// PauseByID returns one pause.
func (s *Store) PauseByID(ctx context.Context, id int64) (Pause, error) {
	var p Pause
	if err := s.db.GetContext(ctx, &p, `SELECT `+pauseColumns+` FROM pauses WHERE id = $1`, id); err != nil {
		return Pause{}, fmt.Errorf("pause %d: %w", id, translate(err))
	}
	return p, nil
}

// WaitingJobs counts the jobs of a queue or a task that are waiting to run
// (available or retrying, due or not), for the pause form.
func (s *Store) WaitingJobs(ctx context.Context, kind, name string) (int64, error) {
	column := "task"
	if kind == PauseQueue {
		column = "queue"
	}
	var n int64
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM jobs WHERE `+column+` = $1 AND state IN ('available', 'retrying')`, name)
	if err != nil {
		return 0, fmt.Errorf("waiting jobs of %s %s: %w", kind, name, translate(err))
	}
	return n, nil
}

// QueueWait is how long the oldest due job of a queue has been waiting.
type QueueWait struct {
	Queue  string    `db:"queue"`
	Oldest time.Time `db:"oldest"`
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
func (s *Store) QueueWaits(ctx context.Context) ([]QueueWait, error) {
	var out []QueueWait
	if err := s.db.SelectContext(ctx, &out, queueWaitsSQL); err != nil {
		return nil, fmt.Errorf("queue waits: %w", translate(err))
	}
	return out, nil
}
