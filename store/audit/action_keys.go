package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// CanonJSON is raw with its keys sorted and its spacing removed; numbers
// keep their digits. nil stays nil (no edit), which differs from [] or {}.
func CanonJSON(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return string(raw)
	}
	return v
}

// claimActionKey reserves key inside tx for the request whose digest is
// hash. It returns the stored result of an earlier action with the same
// key and the same request, or nil when this is the first use; the same
// key with another request is a *KeyReuseError.
func claimActionKey(ctx context.Context, tx *sqlx.Tx, key string, actor dlq.Actor, action, hash string) (json.RawMessage, error) {
	if len(key) > dlq.MaxKeyLen {
		return nil, &dlq.ValidationError{Fields: map[string]string{"key": fmt.Sprintf("at most %d characters", dlq.MaxKeyLen)}}
	}
	var inserted string
	err := tx.GetContext(ctx, &inserted, `
		INSERT INTO action_keys (key, actor, action, request_hash, status, result) VALUES ($1, $2, $3, $4, 0, '{}')
		ON CONFLICT (key) DO NOTHING RETURNING key`, key, actor.Name, action, hash)
	if err == nil {
		return nil, nil
	}
	if postgres.Translate(err) != dlq.ErrNotFound {
		return nil, fmt.Errorf("action key: %w", err)
	}
	var prior struct {
		Actor  string          `db:"actor"`
		Action string          `db:"action"`
		Hash   *string         `db:"request_hash"`
		Result json.RawMessage `db:"result"`
	}
	if err := tx.GetContext(ctx, &prior, `SELECT actor, action, request_hash, result FROM action_keys WHERE key = $1`, key); err != nil {
		return nil, fmt.Errorf("action key: %w", postgres.Translate(err))
	}
	// A key stored without request_hash has no digest: only
	// its actor and action can be compared.
	if prior.Actor != actor.Name || prior.Action != action || (prior.Hash != nil && *prior.Hash != hash) {
		return nil, &dlq.KeyReuseError{}
	}
	return prior.Result, nil
}

// saveActionKey stores the result of the action that reserved key.
func saveActionKey(ctx context.Context, tx *sqlx.Tx, key string, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("action key: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE action_keys SET status = 200, result = $2 WHERE key = $1`, key, b); err != nil {
		return fmt.Errorf("action key: %w", err)
	}
	return nil
}

// OnceWithKey runs act inside tx unless key was used before for the same
// request (hash, from dlq.RequestHash), in which case it decodes the earlier
// result into out and reports repeated = true.
func OnceWithKey(ctx context.Context, tx *sqlx.Tx, key string, actor dlq.Actor, action, hash string, out any, act func() error) (repeated bool, err error) {
	if key == "" {
		return false, act()
	}
	prior, err := claimActionKey(ctx, tx, key, actor, action, hash)
	if err != nil {
		return false, err
	}
	if prior != nil {
		if err := json.Unmarshal(prior, out); err != nil {
			return false, fmt.Errorf("action key: stored result: %w", err)
		}
		return true, nil
	}
	if err := act(); err != nil {
		return false, err
	}
	return false, saveActionKey(ctx, tx, key, out)
}
