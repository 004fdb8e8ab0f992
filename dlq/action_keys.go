package dlq

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Action keys make a submitted action happen once. A form carries a
// one-time key (the API takes an Idempotency-Key header); the action's
// transaction inserts the key first. A resubmission with the same key —
// a double click, a browser retry, a client timeout — blocks on the key's
// unique index until the first transaction ends, then finds the key and
// returns the first result instead of acting again. An action that fails
// rolls its key back with everything else, so a retry after a failure
// simply tries again.

// MaxKeyLen bounds action keys.
const MaxKeyLen = 200

// claimActionKey reserves key inside tx. It returns the stored result of an
// earlier action with the same key, or nil when this is the first use.
func claimActionKey(ctx context.Context, tx *sqlx.Tx, key string, actor Actor, action string) (json.RawMessage, error) {
	if len(key) > MaxKeyLen {
		return nil, &ValidationError{Fields: map[string]string{"key": fmt.Sprintf("at most %d characters", MaxKeyLen)}}
	}
	var inserted string
	err := tx.GetContext(ctx, &inserted, `
		INSERT INTO action_keys (key, actor, action, status, result) VALUES ($1, $2, $3, 0, '{}')
		ON CONFLICT (key) DO NOTHING RETURNING key`, key, actor.Name, action)
	if err == nil {
		return nil, nil
	}
	if translate(err) != ErrNotFound {
		return nil, fmt.Errorf("action key: %w", err)
	}
	var prior struct {
		Actor  string          `db:"actor"`
		Action string          `db:"action"`
		Result json.RawMessage `db:"result"`
	}
	if err := tx.GetContext(ctx, &prior, `SELECT actor, action, result FROM action_keys WHERE key = $1`, key); err != nil {
		return nil, fmt.Errorf("action key: %w", translate(err))
	}
	if prior.Actor != actor.Name || prior.Action != action {
		return nil, fmt.Errorf("%w: this form was already used for another action; reload the page and try again", ErrConflict)
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

// onceWithKey runs act inside tx unless key was used before, in which case
// it decodes the earlier result into out and reports repeated = true.
func onceWithKey(ctx context.Context, tx *sqlx.Tx, key string, actor Actor, action string, out any, act func() error) (repeated bool, err error) {
	if key == "" {
		return false, act()
	}
	prior, err := claimActionKey(ctx, tx, key, actor, action)
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
