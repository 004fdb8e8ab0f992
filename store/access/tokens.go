package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
)

const tokenColumns = `t.id, t.user_id, u.name AS user_name, t.label, t.created_by, t.created_at, t.last_used_at, t.revoked_at, t.sources`

// CreateToken stores a token's hash for an active user and audits it. A
// label already used by an active token is ErrConflict.
func (s *Store) CreateToken(ctx context.Context, p dlq.NewToken) (dlq.Token, error) {
	p.Label = strings.TrimSpace(p.Label)
	if p.Label == "" {
		p.Label = p.UserName + "-" + p.Now.UTC().Format("20060102-150405")
	}
	if len(p.Label) > 100 {
		return dlq.Token{}, &dlq.ValidationError{Fields: map[string]string{"label": "must be at most 100 characters"}}
	}
	var t dlq.Token
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var u dlq.User
		err := tx.GetContext(ctx, &u, `SELECT `+userColumns+` FROM users WHERE lower(name) = lower($1)`, p.UserName)
		if err != nil {
			if errors.Is(postgres.Translate(err), dlq.ErrNotFound) {
				if strings.TrimSpace(p.UserName) == "" {
					return &dlq.ValidationError{Fields: map[string]string{"user": "choose the user the token acts as"}}
				}
				return &dlq.ValidationError{Fields: map[string]string{"user": "there is no user called " + p.UserName}}
			}
			return postgres.Translate(err)
		}
		if !u.Active() {
			return &dlq.ValidationError{Fields: map[string]string{"user": u.Name + " is disabled"}}
		}
		if err := checkTokenSources(ctx, tx, u, p.Sources); err != nil {
			return err
		}
		var sources any // NULL: an ordinary token
		if len(p.Sources) > 0 {
			sources = pq.Array(p.Sources)
		}
		err = tx.GetContext(ctx, &t, `
			WITH t AS (
				INSERT INTO api_tokens (user_id, label, token_hash, created_by, created_at, sources)
				VALUES ($1, $2, $3, $4, $5, $6) RETURNING *)
			SELECT `+tokenColumns+` FROM t JOIN users u ON u.id = t.user_id`,
			u.ID, p.Label, postgres.Bytea(p.Hash), p.Actor.Name, p.Now, sources)
		if err != nil {
			if errors.Is(postgres.Translate(err), dlq.ErrConflict) {
				return dlq.Errorf(dlq.EConflict, "a token labelled %q already exists", p.Label)
			}
			return postgres.Translate(err)
		}
		return auditToken(ctx, tx, p.Actor, p.Now, "create", t)
	})
	if err != nil {
		return dlq.Token{}, fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

// checkTokenSources refuses a token for sources that are not configured
// ones of kind http, or for a user who may not send letters (sending is an
// operator's POST).
func checkTokenSources(ctx context.Context, tx *sqlx.Tx, u dlq.User, sources []string) error {
	if len(sources) == 0 {
		return nil
	}
	if !u.Role.CanAct() {
		return &dlq.ValidationError{Fields: map[string]string{"user": u.Name + " is a " + string(u.Role) +
			": a token that sends letters acts as an operator or an admin"}}
	}
	var known []string
	if err := tx.SelectContext(ctx, &known, `SELECT name FROM sources WHERE kind = ANY($1) AND name = ANY($2)`,
		pq.Array([]string{string(dlq.SourceKindHTTP), string(dlq.SourceKindCelery)}), pq.Array(sources)); err != nil {
		return postgres.Translate(err)
	}
	for _, s := range sources {
		if !slices.Contains(known, s) {
			return &dlq.ValidationError{Fields: map[string]string{"sources": fmt.Sprintf(
				"%q is not a configured source that sends its letters over HTTP (the console's --sources)", s)}}
		}
	}
	return nil
}

// RevokeToken revokes the active token whose id (when ref is a number) or
// label is ref, and audits it. Revoking is final.
func (s *Store) RevokeToken(ctx context.Context, ref string, a dlq.Actor, now time.Time) (dlq.Token, error) {
	var t dlq.Token
	defer s.changed()
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		id, _ := strconv.ParseInt(ref, 10, 64) // 0 when ref is a label
		err := tx.GetContext(ctx, &t, `
			WITH t AS (
				UPDATE api_tokens SET revoked_at = $3
				WHERE revoked_at IS NULL AND CASE WHEN $1 > 0 THEN id = $1 ELSE lower(label) = lower($2) END RETURNING *)
			SELECT `+tokenColumns+` FROM t JOIN users u ON u.id = t.user_id`, id, ref, now)
		if err != nil {
			if errors.Is(postgres.Translate(err), dlq.ErrNotFound) {
				return fmt.Errorf("%w: no active token has the id or label %q", dlq.ErrNotFound, ref)
			}
			return postgres.Translate(err)
		}
		return auditToken(ctx, tx, a, now, "revoke", t)
	})
	if err != nil {
		return dlq.Token{}, fmt.Errorf("revoke token: %w", err)
	}
	return t, nil
}

func auditToken(ctx context.Context, tx *sqlx.Tx, a dlq.Actor, now time.Time, op string, t dlq.Token) error {
	_, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: now, Actor: a.Name, Action: dlq.ActionTokenChange,
		RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
		Details: audit.MustJSON(map[string]any{"op": op, "token_id": t.ID, "label": t.Label, "user": t.UserName}),
	})
	return err
}

// Tokens lists the active tokens, newest first.
func (s *Store) Tokens(ctx context.Context) ([]dlq.Token, error) {
	var out []dlq.Token
	err := s.db.SelectContext(ctx, &out, `SELECT `+tokenColumns+`
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.revoked_at IS NULL ORDER BY t.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// tokenUseResolution is how often last_used_at is written: once a minute
// is plenty to see which tokens are alive, and keeps a busy API client from
// turning every read into a write.
const tokenUseResolution = time.Minute

// UserByToken returns the active user an active token belongs to, and
// notes the token's use. A token unknown, revoked or of a disabled user is
// ErrNotFound.
func (s *Store) UserByToken(ctx context.Context, hash []byte, now time.Time) (dlq.User, dlq.Token, error) {
	var row struct {
		dlq.Token
		User dlq.User `db:"u"`
	}
	err := s.db.GetContext(ctx, &row, `
		SELECT `+tokenColumns+`, u.id AS "u.id", u.name AS "u.name", u.role AS "u.role",
			u.password_hash AS "u.password_hash", u.session_epoch AS "u.session_epoch",
			u.disabled_at AS "u.disabled_at", u.created_at AS "u.created_at", u.updated_at AS "u.updated_at"
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND u.disabled_at IS NULL`, postgres.Prepared, postgres.Bytea(hash))
	if err != nil {
		return dlq.User{}, dlq.Token{}, fmt.Errorf("token: %w", postgres.Translate(err))
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) >= tokenUseResolution {
		if _, err := s.db.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = $2 WHERE id = $1`, row.ID, now); err != nil {
			return dlq.User{}, dlq.Token{}, fmt.Errorf("note token use: %w", err)
		}
	}
	return row.User, row.Token, nil
}
