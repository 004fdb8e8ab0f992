package access

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

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
// failures that came before it. Recording happens before the password is
// checked, under a lock on the address and then one on the name, so
// concurrent guesses count against each other: parallel requests for many
// names from one address, or for one name from many addresses, cannot all
// slip in under a limit. (Every caller takes the address lock first and
// holds no name lock while waiting for it, so two attempts never wait on
// each other in a circle.)
func (s *Store) StartLoginAttempt(ctx context.Context, a dlq.LoginAttempt) (int64, dlq.LoginHistory, error) {
	name := loginName(a.Name)
	var id int64
	var h dlq.LoginHistory
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('login-addr:' || $1, 0))`, a.Addr); err != nil {
			return fmt.Errorf("lock address: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('login:' || $1, 0))`, name); err != nil {
			return fmt.Errorf("lock name: %w", err)
		}
		err := tx.SelectContext(ctx, &h.ByPair, `
			SELECT at FROM login_attempts
			WHERE name = $1 AND remote_addr = $2 AND at > $3 AND outcome IN ('pending', 'failed')
				AND at > coalesce((SELECT max(at) FROM login_attempts
					WHERE name = $1 AND remote_addr = $2 AND outcome = 'succeeded'), '-infinity')
			ORDER BY at DESC LIMIT $4`, name, a.Addr, a.Since, a.Limit)
		if err != nil {
			return fmt.Errorf("failures by name and address: %w", err)
		}
		err = tx.SelectContext(ctx, &h.ByName, `
			SELECT at FROM login_attempts
			WHERE name = $1 AND at > $2 AND outcome IN ('pending', 'failed')
			ORDER BY at DESC LIMIT $3`, name, a.NameSince, a.Limit)
		if err != nil {
			return fmt.Errorf("failures by name: %w", err)
		}
		err = tx.SelectContext(ctx, &h.ByAddr, `
			SELECT at FROM login_attempts
			WHERE remote_addr = $1 AND at > $2 AND outcome IN ('pending', 'failed')
			ORDER BY at DESC LIMIT $3`, a.Addr, a.Since, a.Limit)
		if err != nil {
			return fmt.Errorf("failures by address: %w", err)
		}
		err = tx.GetContext(ctx, &h.KnownAddr, `
			SELECT EXISTS (SELECT 1 FROM sign_in_addresses WHERE name = $1 AND remote_addr = $2 AND last_success_at > $3)`,
			name, a.Addr, a.KnownSince)
		if err != nil {
			return fmt.Errorf("known address: %w", err)
		}
		err = tx.GetContext(ctx, &id, `INSERT INTO login_attempts (name, remote_addr, at) VALUES ($1, $2, $3) RETURNING id`, name, a.Addr, a.Now)
		if err != nil {
			return fmt.Errorf("record: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_attempts WHERE at < $1`, a.Now.Add(-loginAttemptsKept)); err != nil {
			return fmt.Errorf("forget old attempts: %w", err)
		}
		// The name's addresses are one range of the primary key.
		_, err = tx.ExecContext(ctx, `DELETE FROM sign_in_addresses WHERE name = $1 AND last_success_at <= $2`, name, a.KnownSince)
		return err
	})
	if err != nil {
		return 0, dlq.LoginHistory{}, fmt.Errorf("sign-in attempt: %w", err)
	}
	return id, h, nil
}

// FinishLoginAttempt records an attempt's outcome; a success or failure
// also goes to the audit trail, in the same transaction.
func (s *Store) FinishLoginAttempt(ctx context.Context, r dlq.LoginResult) error {
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE login_attempts SET outcome = $2 WHERE id = $1`, r.AttemptID, r.Outcome); err != nil {
			return err
		}
		action := dlq.ActionSignIn
		switch r.Outcome {
		case dlq.LoginSucceeded:
			// The address is now known for the name (see LoginHistory.KnownAddr).
			_, err := tx.ExecContext(ctx, `
				INSERT INTO sign_in_addresses AS k (name, remote_addr, last_success_at) VALUES ($1, $2, $3)
				ON CONFLICT (name, remote_addr) DO UPDATE SET last_success_at = greatest(k.last_success_at, EXCLUDED.last_success_at)`,
				loginName(r.Name), r.Actor.RemoteAddr, r.Now)
			if err != nil {
				return fmt.Errorf("remember address: %w", err)
			}
		case dlq.LoginFailed:
			action = dlq.ActionSignInFailed
		default:
			return nil
		}
		_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
			At: r.Now, Actor: clipName(r.Name), Action: action,
			RequestID: r.Actor.RequestID, RemoteAddr: r.Actor.RemoteAddr, UserAgent: r.Actor.UserAgent,
			Details: audit.MustJSON(map[string]string{"via": "password"}),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("finish sign-in attempt: %w", err)
	}
	return nil
}
