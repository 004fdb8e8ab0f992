package dlq

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// LoginOutcome is how a sign-in attempt ended.
type LoginOutcome string

// Sign-in outcomes. Pending and failed attempts count towards throttling.
const (
	LoginPending   LoginOutcome = "pending"
	LoginFailed    LoginOutcome = "failed"
	LoginSucceeded LoginOutcome = "succeeded"
	// LoginThrottled was refused before its password was looked at; it is
	// not a failure, so a locked account does not stay locked for ever
	// while someone keeps trying.
	LoginThrottled LoginOutcome = "throttled"
)

// LoginHistory is the recent failed sign-ins that decide whether the next
// one is slowed or refused, newest first.
type LoginHistory struct {
	// ByName are failures for the name since its last success.
	ByName []time.Time
	// ByAddr are failures from the address, for any name.
	ByAddr []time.Time
}

// loginAttemptsKept is how long attempts are kept: far longer than any
// throttling window.
const loginAttemptsKept = 24 * time.Hour

// loginName is how a name is kept for throttling: case does not make a
// different account, and a very long "name" (a pasted password?) is cut.
func loginName(name string) string { return strings.ToLower(clipName(name)) }

func clipName(name string) string {
	name = strings.TrimSpace(name)
	if len(name) > 200 {
		name = strings.ToValidUTF8(name[:200], "")
	}
	return name
}

// StartLoginAttempt records an attempt as pending and returns it with the
// failures that came before it within window (at most limit of each
// kind). Recording before the password is checked, under a per-name lock,
// makes concurrent guesses count against each other: a burst of parallel
// requests cannot all slip in under the limit.
func (s *Store) StartLoginAttempt(ctx context.Context, name, addr string, now time.Time, window time.Duration, limit int) (int64, LoginHistory, error) {
	name = loginName(name)
	var id int64
	var h LoginHistory
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('login:' || $1, 0))`, name); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		since := now.Add(-window)
		err := tx.SelectContext(ctx, &h.ByName, `
			SELECT at FROM login_attempts
			WHERE name = $1 AND at > $2 AND outcome IN ('pending', 'failed')
				AND at > coalesce((SELECT max(at) FROM login_attempts WHERE name = $1 AND outcome = 'succeeded'), '-infinity')
			ORDER BY at DESC LIMIT $3`, name, since, limit)
		if err != nil {
			return fmt.Errorf("failures by name: %w", err)
		}
		err = tx.SelectContext(ctx, &h.ByAddr, `
			SELECT at FROM login_attempts
			WHERE remote_addr = $1 AND at > $2 AND outcome IN ('pending', 'failed')
			ORDER BY at DESC LIMIT $3`, addr, since, limit)
		if err != nil {
			return fmt.Errorf("failures by address: %w", err)
		}
		err = tx.GetContext(ctx, &id, `INSERT INTO login_attempts (name, remote_addr, at) VALUES ($1, $2, $3) RETURNING id`, name, addr, now)
		if err != nil {
			return fmt.Errorf("record: %w", err)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM login_attempts WHERE at < $1`, now.Add(-loginAttemptsKept))
		return err
	})
	if err != nil {
		return 0, LoginHistory{}, fmt.Errorf("sign-in attempt: %w", err)
	}
	return id, h, nil
}

// LoginResult is how an attempt ended, for FinishLoginAttempt.
type LoginResult struct {
	AttemptID int64
	Outcome   LoginOutcome
	// Name is the user's name on success, the name typed on failure.
	Name  string
	Actor Actor
	Now   time.Time
}

// FinishLoginAttempt records an attempt's outcome; a success or failure
// also goes to the audit trail, in the same transaction.
func (s *Store) FinishLoginAttempt(ctx context.Context, r LoginResult) error {
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE login_attempts SET outcome = $2 WHERE id = $1`, r.AttemptID, r.Outcome); err != nil {
			return err
		}
		action := ActionSignIn
		switch r.Outcome {
		case LoginSucceeded:
		case LoginFailed:
			action = ActionSignInFailed
		default:
			return nil
		}
		_, err := appendAudit(ctx, tx, AuditEntry{
			At: r.Now, Actor: clipName(r.Name), Action: action,
			RequestID: r.Actor.RequestID, RemoteAddr: r.Actor.RemoteAddr, UserAgent: r.Actor.UserAgent,
			Details: mustJSON(map[string]string{"via": "password"}),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("finish sign-in attempt: %w", err)
	}
	return nil
}

// ThrottledError refuses a sign-in attempt, unchecked, after too many
// failures: wait RetryAfter. Locked says it is the long lock rather than a
// short slow-down.
type ThrottledError struct {
	RetryAfter time.Duration
	Locked     bool
}

func (e *ThrottledError) Error() string {
	if e.Locked {
		return fmt.Sprintf("too many failed sign-ins: signing in is locked for %s", e.RetryAfter.Round(time.Minute))
	}
	return fmt.Sprintf("too many failed sign-ins: wait %s", e.RetryAfter.Round(time.Second))
}
