package access

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

// userChangeLockKey is the pg_advisory_xact_lock key that serialises
// changes to users.
const userChangeLockKey = 7_240_117_312

const userColumns = `id, name, role, password_hash, session_epoch, disabled_at, created_at, updated_at`

// CreateUser adds a user and audits it in one transaction. A name already
// taken (in any case) is ErrConflict.
func (s *Store) CreateUser(ctx context.Context, p dlq.NewUser) (dlq.User, error) {
	if err := p.Validate(); err != nil {
		return dlq.User{}, err
	}
	var u dlq.User
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		err := tx.GetContext(ctx, &u, `INSERT INTO users (name, role, password_hash, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4) RETURNING `+userColumns, p.Name, p.Role, postgres.Bytea(p.PasswordHash), p.Now)
		if err != nil {
			if errors.Is(postgres.Translate(err), dlq.ErrConflict) {
				return dlq.Errorf(dlq.EConflict, "there is already a user called %s", p.Name)
			}
			return postgres.Translate(err)
		}
		return auditUserChange(ctx, tx, p.Actor, p.Now, "create", u)
	})
	if err != nil {
		return dlq.User{}, fmt.Errorf("create user: %w", err)
	}
	return u, nil
}

// SetPassword replaces a user's password hash and ends their sessions.
func (s *Store) SetPassword(ctx context.Context, name string, hash []byte, c dlq.UserChange) (dlq.User, error) {
	if len(hash) == 0 {
		return dlq.User{}, &dlq.ValidationError{Fields: map[string]string{"password": "is required"}}
	}
	return s.changeUser(ctx, name, c, "password", `
		UPDATE users SET password_hash = $3, session_epoch = session_epoch + 1, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns, postgres.Bytea(hash))
}

// DisableUser stops a user signing in and ends their sessions and the use
// of their tokens at once. The last active admin cannot be disabled.
func (s *Store) DisableUser(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error) {
	return s.changeUser(ctx, name, c, "disable", `
		UPDATE users SET disabled_at = coalesce(disabled_at, $2), session_epoch = session_epoch + 1, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns)
}

// EnableUser lets a disabled user sign in again (with their password).
func (s *Store) EnableUser(ctx context.Context, name string, c dlq.UserChange) (dlq.User, error) {
	return s.changeUser(ctx, name, c, "enable", `
		UPDATE users SET disabled_at = NULL, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns)
}

// SetRole changes a user's role; it takes effect on their next request.
// The last active admin cannot be demoted.
func (s *Store) SetRole(ctx context.Context, name string, role dlq.Role, c dlq.UserChange) (dlq.User, error) {
	if !role.Valid() {
		return dlq.User{}, &dlq.ValidationError{Fields: map[string]string{"role": "must be viewer, operator or admin"}}
	}
	return s.changeUser(ctx, name, c, "role", `
		UPDATE users SET role = $3, updated_at = $2
		WHERE lower(name) = lower($1) RETURNING `+userColumns, role)
}

// changeUser runs one UPDATE of a user by name ($1 the name, $2 the time,
// $3 the new value, if any), checks that an active admin remains, and
// audits the change, in one transaction.
func (s *Store) changeUser(ctx context.Context, name string, c dlq.UserChange, op, query string, value ...any) (dlq.User, error) {
	var u dlq.User
	defer s.changed()
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		// Serialise user changes, so that two admins demoting each other
		// at once cannot both see the other still in place.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, userChangeLockKey); err != nil {
			return fmt.Errorf("lock users: %w", err)
		}
		var wasAdmin bool
		err := tx.GetContext(ctx, &wasAdmin, `SELECT role = 'admin' AND disabled_at IS NULL FROM users WHERE lower(name) = lower($1)`, name)
		if errors.Is(postgres.Translate(err), dlq.ErrNotFound) {
			return fmt.Errorf("%w: there is no user called %s", dlq.ErrNotFound, name)
		}
		if err != nil {
			return fmt.Errorf("read user: %w", err)
		}
		if err := tx.GetContext(ctx, &u, query, append([]any{name, c.Now}, value...)...); err != nil {
			return postgres.Translate(err)
		}
		if wasAdmin && (u.Role != dlq.RoleAdmin || !u.Active()) {
			if err := requireAdmin(ctx, tx); err != nil {
				return err
			}
		}
		return auditUserChange(ctx, tx, c.Actor, c.Now, op, u)
	})
	if err != nil {
		return dlq.User{}, fmt.Errorf("change user %s: %w", name, err)
	}
	return u, nil
}

// requireAdmin refuses a change that takes away the last active admin: the
// console would have nobody left to manage users (the CLI still could, but
// nobody should find that out by accident).
func requireAdmin(ctx context.Context, tx *sqlx.Tx) error {
	var ok bool
	err := tx.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM users WHERE role = 'admin' AND disabled_at IS NULL)`)
	if err != nil {
		return fmt.Errorf("look for an admin: %w", err)
	}
	if !ok {
		return dlq.ErrLastAdmin
	}
	return nil
}

func auditUserChange(ctx context.Context, tx *sqlx.Tx, a dlq.Actor, now time.Time, op string, u dlq.User) error {
	_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: now, Actor: a.Name, Action: dlq.ActionUserChange,
		RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
		Details: audit.MustJSON(map[string]any{"op": op, "user": u.Name, "role": u.Role, "disabled": !u.Active()}),
	})
	return err
}

// User returns the user with id; ErrNotFound if there is none. It is read
// on every signed-in request, by primary key.
func (s *Store) User(ctx context.Context, id int64) (dlq.User, error) {
	var u dlq.User
	if err := s.db.GetContext(ctx, &u, `SELECT `+userColumns+` FROM users WHERE id = $1`, id); err != nil {
		return dlq.User{}, fmt.Errorf("user %d: %w", id, postgres.Translate(err))
	}
	return u, nil
}

// UserByName returns the user called name, in any case.
func (s *Store) UserByName(ctx context.Context, name string) (dlq.User, error) {
	var u dlq.User
	if err := s.db.GetContext(ctx, &u, `SELECT `+userColumns+` FROM users WHERE lower(name) = lower($1)`, name); err != nil {
		return dlq.User{}, fmt.Errorf("user %s: %w", name, postgres.Translate(err))
	}
	return u, nil
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]dlq.User, error) {
	var out []dlq.User
	if err := s.db.SelectContext(ctx, &out, `SELECT `+userColumns+` FROM users ORDER BY lower(name)`); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// CountUsers returns how many users there are, disabled ones included.
func (s *Store) CountUsers(ctx context.Context) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM users`); err != nil {
		return 0, fmt.Errorf("count users: %w", err)
	}
	return n, nil
}
