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

// Throttles are kept as pauses are (pause.go): one open row per queue or
// task, set, changed and lifted with an audit entry in the same
// transaction, ended by itself at its until. Workers lease shares of the
// open ones (grants.go) and the claim takes the room they pass it
// (queue.go, throttledClaimQuery).

const throttleColumns = `id, kind, name, max_running, max_per_second, reason, set_by, set_at, until,
	changed_by, changed_at, lifted_at, lifted_by, expired`

const insertThrottleSQL = `
INSERT INTO throttles (kind, name, max_running, max_per_second, reason, set_by, until)
VALUES ($1, $2, $3::integer, $4::double precision, $5, $6, $7)
ON CONFLICT (kind, name) WHERE lifted_at IS NULL DO NOTHING
RETURNING ` + throttleColumns

const openThrottleOfSQL = `SELECT ` + throttleColumns + ` FROM throttles WHERE kind = $1 AND name = $2 AND lifted_at IS NULL`

// SetThrottle opens a throttle, or changes an open one (p.ID set), and
// audits it in one transaction. A queue or task already throttled is a
// *dlq.ThrottleConflictError naming the open throttle: change that one
// instead, so that nobody's limits are replaced behind their back; a
// change of a throttle that has ended is that error too. An expired but
// unrecorded throttle is closed first, so it does not stand in the way.
func (s *Store) SetThrottle(ctx context.Context, p dlq.ThrottleParams) (dlq.ThrottleResult, error) {
	if problems := p.Valid(); len(problems) > 0 {
		return dlq.ThrottleResult{}, &dlq.ValidationError{Fields: problems}
	}
	p.Reason = strings.TrimSpace(p.Reason)
	action := dlq.ActionThrottle
	if p.ID != 0 {
		action = dlq.ActionThrottleChange
	}
	var res dlq.ThrottleResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var until any
		if p.Until != nil {
			until = p.Until.UTC()
		}
		var expiry any = until
		if p.Expiry != "" {
			expiry = p.Expiry
		}
		hash := dlq.RequestHash(action, p.ID, p.Kind, p.Name, p.MaxRunning, p.MaxPerSecond, p.Reason, expiry)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, action, hash, &res, func() error {
			var (
				t       dlq.Throttle
				details map[string]any
				err     error
			)
			if p.ID == 0 {
				t, err = s.openThrottle(ctx, tx, p, until)
				details = throttleDetails(t)
			} else {
				var before dlq.Throttle
				before, t, err = s.changeThrottle(ctx, tx, p, until)
				details = throttleDetails(t)
				details["before"] = throttleDetails(before)
			}
			if err != nil {
				return err
			}
			auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: action, Reason: p.Reason,
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(details),
			})
			if err != nil {
				return err
			}
			if err := wakeWorkersFor(ctx, tx, t.Kind, t.Name); err != nil {
				return err
			}
			res = dlq.ThrottleResult{Throttle: t, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

// openThrottle inserts a new throttle, or reports the open one in its way.
func (s *Store) openThrottle(ctx context.Context, tx *sqlx.Tx, p dlq.ThrottleParams, until any) (dlq.Throttle, error) {
	if _, err := expireThrottlesInTx(ctx, tx, p.Now, "kind = $1 AND name = $2", p.Kind, p.Name); err != nil {
		return dlq.Throttle{}, err
	}
	var t dlq.Throttle
	err := tx.GetContext(ctx, &t, insertThrottleSQL, p.Kind, p.Name, p.MaxRunning, p.MaxPerSecond, p.Reason, p.Actor.Name, until)
	if err == nil {
		return t, nil
	}
	if postgres.Translate(err) != dlq.ErrNotFound {
		return dlq.Throttle{}, fmt.Errorf("throttle %s %s: %w", p.Kind, p.Name, postgres.Translate(err))
	}
	var open dlq.Throttle
	if err := tx.GetContext(ctx, &open, openThrottleOfSQL, p.Kind, p.Name); err != nil {
		return dlq.Throttle{}, fmt.Errorf("throttle %s %s: %w", p.Kind, p.Name, postgres.Translate(err))
	}
	return dlq.Throttle{}, &dlq.ThrottleConflictError{Throttle: open}
}

// changeThrottleSQL rewrites an open throttle's limits, reason and expiry,
// and bumps its revision: every grant of it is void from the change's
// commit on, so the next claim of each worker takes none of its jobs
// until the worker holds a grant of the new limits (grants.go).
const changeThrottleSQL = `
UPDATE throttles SET max_running = $2::integer, max_per_second = $3::double precision, reason = $4, until = $5,
	changed_by = $6, changed_at = now(), revision = revision + 1
WHERE id = $1 AND lifted_at IS NULL
RETURNING ` + throttleColumns

// changeThrottle changes an open throttle and returns it before and after.
// The row is locked first (FOR UPDATE), which waits for a renewal of its
// grants holding it.
func (s *Store) changeThrottle(ctx context.Context, tx *sqlx.Tx, p dlq.ThrottleParams, until any) (before, after dlq.Throttle, err error) {
	if _, err := expireThrottlesInTx(ctx, tx, p.Now, "id = $1", p.ID); err != nil {
		return before, after, err
	}
	if err := tx.GetContext(ctx, &before, `SELECT `+throttleColumns+` FROM throttles WHERE id = $1 FOR UPDATE`, p.ID); err != nil {
		return before, after, fmt.Errorf("change throttle %d: %w", p.ID, postgres.Translate(err))
	}
	if before.LiftedAt != nil {
		return before, after, &dlq.ThrottleConflictError{Throttle: before, Ended: true}
	}
	if p.Until != nil && !p.Until.After(before.SetAt) {
		return before, after, &dlq.ValidationError{Fields: map[string]string{"until": "must be after the throttle was set"}}
	}
	if err := tx.GetContext(ctx, &after, changeThrottleSQL, p.ID, p.MaxRunning, p.MaxPerSecond, p.Reason, until, p.Actor.Name); err != nil {
		return before, after, fmt.Errorf("change throttle %d: %w", p.ID, postgres.Translate(err))
	}
	return before, after, nil
}

const liftThrottleSQL = `
UPDATE throttles SET lifted_at = now(), lifted_by = $2
WHERE id = $1 AND lifted_at IS NULL
RETURNING ` + throttleColumns

// LiftThrottle ends an open throttle, audits it and wakes the workers, in
// one transaction. The guard (lifted_at IS NULL) lets only one of two
// racing lifts, or a lift and an expiry, end it; the loser gets a
// *dlq.ThrottleConflictError saying how it ended.
func (s *Store) LiftThrottle(ctx context.Context, p dlq.LiftParams) (dlq.ThrottleResult, error) {
	if utf8.RuneCountInString(p.Reason) > dlq.MaxPauseReason {
		return dlq.ThrottleResult{}, &dlq.ValidationError{Fields: map[string]string{"reason": fmt.Sprintf("at most %d characters", dlq.MaxPauseReason)}}
	}
	var res dlq.ThrottleResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash(dlq.ActionThrottleLift, p.ID, p.Reason)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, dlq.ActionThrottleLift, hash, &res, func() error {
			if _, err := expireThrottlesInTx(ctx, tx, p.Now, "id = $1", p.ID); err != nil {
				return err
			}
			var lifted dlq.Throttle
			if err := tx.GetContext(ctx, &lifted, liftThrottleSQL, p.ID, p.Actor.Name); err != nil {
				if postgres.Translate(err) != dlq.ErrNotFound {
					return fmt.Errorf("lift throttle %d: %w", p.ID, postgres.Translate(err))
				}
				ended, err := throttleInTx(ctx, tx, p.ID)
				if err != nil {
					return err
				}
				return &dlq.ThrottleConflictError{Throttle: ended, Ended: true}
			}
			auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
				At: p.Now, Actor: p.Actor.Name, Action: dlq.ActionThrottleLift, Reason: strings.TrimSpace(p.Reason),
				RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
				Details: audit.MustJSON(throttleDetails(lifted)),
			})
			if err != nil {
				return err
			}
			if err := wakeWorkersFor(ctx, tx, lifted.Kind, lifted.Name); err != nil {
				return err
			}
			res = dlq.ThrottleResult{Throttle: lifted, AuditID: auditID}
			return nil
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

func throttleInTx(ctx context.Context, tx *sqlx.Tx, id int64) (dlq.Throttle, error) {
	var t dlq.Throttle
	if err := tx.GetContext(ctx, &t, `SELECT `+throttleColumns+` FROM throttles WHERE id = $1`, id); err != nil {
		return dlq.Throttle{}, fmt.Errorf("throttle %d: %w", id, postgres.Translate(err))
	}
	return t, nil
}

// expireThrottlesSQL closes the open throttles whose until has passed;
// its guard makes the console and every worker safe to run it at once,
// as expirePausesSQL's does.
const expireThrottlesSQL = `
UPDATE throttles SET lifted_at = until, lifted_by = '` + dlq.ExpiryActor + `', expired = true
WHERE lifted_at IS NULL AND until <= now() AND %s
RETURNING ` + throttleColumns

// ExpireThrottles records the throttles whose until has passed as ended,
// with an audit entry each, and wakes the workers. It returns them.
func (s *Store) ExpireThrottles(ctx context.Context, now time.Time) ([]dlq.Throttle, error) {
	var expired []dlq.Throttle
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var err error
		expired, err = expireThrottlesInTx(ctx, tx, now, "true")
		return err
	})
	return expired, err
}

// throttleExpiry records a throttle's time running out.
var throttleExpiry = holdExpiry[dlq.Throttle]{what: "throttles", action: dlq.ActionThrottleExpired, reason: "the throttle's time ran out",
	target: func(t dlq.Throttle) (string, string) { return t.Kind, t.Name }, details: throttleDetails}

func expireThrottlesInTx(ctx context.Context, tx *sqlx.Tx, now time.Time, where string, args ...any) ([]dlq.Throttle, error) {
	return throttleExpiry.expire(ctx, tx, now, fmt.Sprintf(expireThrottlesSQL, where), args...)
}

// throttleDetails is what a throttle's audit entries record besides the
// reason.
func throttleDetails(t dlq.Throttle) map[string]any {
	d := map[string]any{"throttle_id": t.ID, "kind": t.Kind, "name": t.Name, t.Kind: t.Name,
		"max_running": t.MaxRunning, "max_per_second": t.MaxPerSecond,
		"set_by": t.SetBy, "set_at": t.SetAt.UTC().Format(time.RFC3339)}
	if t.Until != nil {
		d["until"] = t.Until.UTC().Format(time.RFC3339)
	}
	return d
}

// OpenThrottles lists the throttles that limit something now, oldest
// first, and reports whether an expired one is still waiting to be
// recorded (ExpireThrottles). It reads only the small throttles table:
// every console page calls it, for the banner.
func (s *Store) OpenThrottles(ctx context.Context) (open []dlq.Throttle, lapsed bool, err error) {
	var rows []struct {
		dlq.Throttle
		Lapsed bool `db:"lapsed"`
	}
	err = s.db.SelectContext(ctx, &rows, `
		SELECT `+throttleColumns+`, until IS NOT NULL AND until <= now() AS lapsed
		FROM throttles WHERE lifted_at IS NULL ORDER BY set_at, id`, postgres.Prepared)
	if err != nil {
		return nil, false, fmt.Errorf("open throttles: %w", postgres.Translate(err))
	}
	for _, r := range rows {
		if r.Lapsed {
			lapsed = true
			continue
		}
		open = append(open, r.Throttle)
	}
	return open, lapsed, nil
}

// ThrottlesWithWork lists the open throttles with their jobs running now
// (through jobs_running_lease_idx) and due now (through
// jobs_task_state_idx or jobs_claimable_idx): O(their jobs), for the
// throttles' page and the API only.
func (s *Store) ThrottlesWithWork(ctx context.Context) ([]dlq.ActiveThrottle, error) {
	var out []dlq.ActiveThrottle
	err := s.db.SelectContext(ctx, &out, `
		SELECT `+prefixed("t", throttleColumns)+`,
			(SELECT count(*) FROM jobs j WHERE j.state = 'running'
				AND CASE WHEN t.kind = 'task' THEN j.task = t.name ELSE j.queue = t.name END) AS running,
			(SELECT count(*) FROM jobs j WHERE t.kind = 'task' AND j.task = t.name
				AND j.state IN ('available', 'retrying') AND j.run_at <= now())
			+ (SELECT count(*) FROM jobs j WHERE t.kind = 'queue' AND j.queue = t.name
				AND j.state IN ('available', 'retrying') AND j.run_at <= now()) AS waiting
		FROM throttles t
		WHERE t.lifted_at IS NULL AND (t.until IS NULL OR t.until > now())
		ORDER BY t.set_at, t.id`)
	if err != nil {
		return nil, fmt.Errorf("throttles with work: %w", postgres.Translate(err))
	}
	return out, nil
}

// prefixed qualifies each of a column list's names with alias.
func prefixed(alias, columns string) string {
	names := strings.Split(columns, ",")
	for i, n := range names {
		names[i] = alias + "." + strings.TrimSpace(n)
	}
	return strings.Join(names, ", ")
}

// RecentThrottles lists the latest throttles, open or ended, newest first.
func (s *Store) RecentThrottles(ctx context.Context, limit int) ([]dlq.Throttle, error) {
	var out []dlq.Throttle
	if err := s.db.SelectContext(ctx, &out, `SELECT `+throttleColumns+` FROM throttles ORDER BY id DESC LIMIT $1`, limit); err != nil {
		return nil, fmt.Errorf("recent throttles: %w", postgres.Translate(err))
	}
	return out, nil
}

// ThrottleByID returns one throttle.
func (s *Store) ThrottleByID(ctx context.Context, id int64) (dlq.Throttle, error) {
	var t dlq.Throttle
	if err := s.db.GetContext(ctx, &t, `SELECT `+throttleColumns+` FROM throttles WHERE id = $1`, id); err != nil {
		return dlq.Throttle{}, fmt.Errorf("throttle %d: %w", id, postgres.Translate(err))
	}
	return t, nil
}
