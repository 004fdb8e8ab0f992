package access

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// SessionUser returns the user with id, as User does, and whether the
// session whose secret hashes to sidHash was signed out. One query: it
// runs on every signed-in request.
func (s *Store) SessionUser(ctx context.Context, id int64, sidHash []byte) (dlq.User, bool, error) {
	var row struct {
		dlq.User
		Revoked bool `db:"revoked"`
	}
	err := s.db.GetContext(ctx, &row, `SELECT `+userColumns+`,
			EXISTS (SELECT 1 FROM session_revocations WHERE sid_hash = $2) AS revoked
		FROM users WHERE id = $1`, postgres.Prepared, id, postgres.Bytea(sidHash))
	if err != nil {
		return dlq.User{}, false, fmt.Errorf("session user %d: %w", id, postgres.Translate(err))
	}
	return row.User, row.Revoked, nil
}

// RevokeSession records that a session of userID, whose secret hashes to
// sidHash, was signed out at now; it would have expired at expires, after
// which the row is no longer needed and is deleted (by a later call).
func (s *Store) RevokeSession(ctx context.Context, sidHash []byte, userID int64, expires, now time.Time) error {
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_revocations (sid_hash, user_id, revoked_at, expires_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (sid_hash) DO NOTHING`, postgres.Bytea(sidHash), userID, now, expires); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM session_revocations WHERE expires_at < $1`, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// EndSessions ends every session the user called name has, in every
// browser, at their next request ("sign out everywhere"), and audits it.
// API tokens are not sessions and go on working.
func (s *Store) EndSessions(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error) {
	return s.changeUser(ctx, name, c, "signout", `
		UPDATE users SET session_epoch = session_epoch + 1, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns)
}
