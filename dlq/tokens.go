package dlq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// TokenPrefix starts every API token, so one pasted into the wrong place
// (a log, a chat, a repository) is recognisable by secret scanners.
const TokenPrefix = "rdv_"

// Token is an API token as listed: never the token itself, which is shown
// once when it is created and stored only as a hash.
type Token struct {
	ID         int64      `db:"id" json:"id"`
	UserID     int64      `db:"user_id" json:"user_id"`
	UserName   string     `db:"user_name" json:"user"`
	Label      string     `db:"label" json:"label"`
	CreatedBy  string     `db:"created_by" json:"created_by"`
	CreatedAt  time.Time  `db:"created_at" json:"created_at"`
	LastUsedAt *time.Time `db:"last_used_at" json:"last_used_at"`
	RevokedAt  *time.Time `db:"revoked_at" json:"revoked_at"`
}

// NewTokenSecret returns a fresh token: 256 random bits, URL-safe.
func NewTokenSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is what is stored of a token and looked up by. SHA-256 and not
// bcrypt: a token is 256 random bits, so there is no dictionary to slow
// down, and every API request looks one up.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// NewToken asks for a token for a user.
type NewToken struct {
	UserName string
	Label    string // default: the user's name and the time
	Hash     []byte
	Actor    Actor
	Now      time.Time
}

const tokenColumns = `t.id, t.user_id, u.name AS user_name, t.label, t.created_by, t.created_at, t.last_used_at, t.revoked_at`

// CreateToken stores a token's hash for an active user and audits it. A
// label already used by an active token is ErrConflict.
func (s *Store) CreateToken(ctx context.Context, p NewToken) (Token, error) {
	p.Label = strings.TrimSpace(p.Label)
	if p.Label == "" {
		p.Label = p.UserName + "-" + p.Now.UTC().Format("20060102-150405")
	}
	if len(p.Label) > 100 {
		return Token{}, &ValidationError{Fields: map[string]string{"label": "must be at most 100 characters"}}
	}
	var t Token
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var u User
		err := tx.GetContext(ctx, &u, `SELECT `+userColumns+` FROM users WHERE lower(name) = lower($1)`, p.UserName)
		if err != nil {
			if errors.Is(translate(err), ErrNotFound) {
				if strings.TrimSpace(p.UserName) == "" {
					return &ValidationError{Fields: map[string]string{"user": "choose the user the token acts as"}}
				}
				return &ValidationError{Fields: map[string]string{"user": "there is no user called " + p.UserName}}
			}
			return translate(err)
		}
		if !u.Active() {
			return &ValidationError{Fields: map[string]string{"user": u.Name + " is disabled"}}
		}
		err = tx.GetContext(ctx, &t, `
			WITH t AS (
				INSERT INTO api_tokens (user_id, label, token_hash, created_by, created_at)
				VALUES ($1, $2, $3, $4, $5) RETURNING *)
			SELECT `+tokenColumns+` FROM t JOIN users u ON u.id = t.user_id`,
			u.ID, p.Label, bytea(p.Hash), p.Actor.Name, p.Now)
		if err != nil {
			if errors.Is(translate(err), ErrConflict) {
				return Errorf(EConflict, "a token labelled %q already exists", p.Label)
			}
			return translate(err)
		}
		return auditToken(ctx, tx, p.Actor, p.Now, "create", t)
	})
	if err != nil {
		return Token{}, fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

// RevokeToken revokes the active token whose id (when ref is a number) or
// label is ref, and audits it. Revoking is final.
func (s *Store) RevokeToken(ctx context.Context, ref string, a Actor, now time.Time) (Token, error) {
	var t Token
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		id, _ := strconv.ParseInt(ref, 10, 64) // 0 when ref is a label
		err := tx.GetContext(ctx, &t, `
			WITH t AS (
				UPDATE api_tokens SET revoked_at = $3
				WHERE revoked_at IS NULL AND CASE WHEN $1 > 0 THEN id = $1 ELSE lower(label) = lower($2) END RETURNING *)
			SELECT `+tokenColumns+` FROM t JOIN users u ON u.id = t.user_id`, id, ref, now)
		if err != nil {
			if errors.Is(translate(err), ErrNotFound) {
				return fmt.Errorf("%w: no active token has the id or label %q", ErrNotFound, ref)
			}
			return translate(err)
		}
		return auditToken(ctx, tx, a, now, "revoke", t)
	})
	if err != nil {
		return Token{}, fmt.Errorf("revoke token: %w", err)
	}
	return t, nil
}

func auditToken(ctx context.Context, tx *sqlx.Tx, a Actor, now time.Time, op string, t Token) error {
	_, err := appendAudit(ctx, tx, AuditEntry{
		At: now, Actor: a.Name, Action: ActionTokenChange,
		RequestID: a.RequestID, RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent,
		Details: mustJSON(map[string]any{"op": op, "token_id": t.ID, "label": t.Label, "user": t.UserName}),
	})
	return err
}

// Tokens lists the active tokens, newest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	var out []Token
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
func (s *Store) UserByToken(ctx context.Context, hash []byte, now time.Time) (User, Token, error) {
	var row struct {
		Token
		User User `db:"u"`
	}
	err := s.db.GetContext(ctx, &row, `
		SELECT `+tokenColumns+`, u.id AS "u.id", u.name AS "u.name", u.role AS "u.role",
			u.password_hash AS "u.password_hash", u.session_epoch AS "u.session_epoch",
			u.disabled_at AS "u.disabled_at", u.created_at AS "u.created_at", u.updated_at AS "u.updated_at"
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND u.disabled_at IS NULL`, bytea(hash))
	if err != nil {
		return User{}, Token{}, fmt.Errorf("token: %w", translate(err))
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) >= tokenUseResolution {
		if _, err := s.db.ExecContext(ctx, `UPDATE api_tokens SET last_used_at = $2 WHERE id = $1`, row.ID, now); err != nil {
			return User{}, Token{}, fmt.Errorf("note token use: %w", err)
		}
	}
	return row.User, row.Token, nil
}
