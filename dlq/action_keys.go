package dlq

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Action keys make a submitted action happen once. A form carries a
// one-time key (the API takes an Idempotency-Key header); the action's
// transaction inserts the key first. A resubmission with the same key —
// a double click, a browser retry, a client timeout — blocks on the key's
// unique index until the first transaction ends, then finds the key and
// returns the first result instead of acting again. A key is bound to the
// request it was first used for (a digest of its action, target and body):
// the same key with another request is refused, never answered with the
// first result. An action that fails rolls its key back with everything
// else, so a retry after a failure simply tries again.

// MaxKeyLen bounds action keys.
const MaxKeyLen = 200

// KeyReuseError means a key came back with a different request than the
// one it was first used for: another letter, another action, another body
// or another person. Nothing was done. Answering with the first result
// would tell the client its new request had happened when it had not (a
// discard of letter 8 answered "discarded" while 8 was still pending), so
// the request is refused, as Stripe's API refuses it (HTTP 422). It
// matches ErrInvalid under errors.Is.
type KeyReuseError struct{}

func (e *KeyReuseError) Error() string {
	return "this one-time key (a form's, or the Idempotency-Key header) was already used for a different request: " +
		"another letter, action or body. Nothing was done; send a new key for a new request, or reload the page"
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *KeyReuseError) Is(target error) bool { return target == ErrInvalid }

// As finds a KeyReuseError as an Error coded EKeyReused.
func (e *KeyReuseError) As(target any) bool {
	return setError(target, &Error{Code: EKeyReused, Message: "Refused: " + e.Error() + "."})
}

// requestHash is the digest a key is bound to: what the request asked for
// (its action, its target, its body), as a list of values in a fixed order
// that each action chooses. JSON bodies inside it are canonicalised first
// (canonJSON), so the same body spelled with other spacing or key order is
// the same request.
func requestHash(parts ...any) string {
	b, err := json.Marshal(parts)
	if err != nil {
		// Only values json cannot encode (NaN) get here; their text still
		// tells requests apart.
		b = fmt.Appendf(nil, "%#v", parts)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// canonJSON is raw with its keys sorted and its spacing removed; numbers
// keep their digits. nil stays nil (no edit), which differs from [] or {}.
func canonJSON(raw json.RawMessage) any {
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
func claimActionKey(ctx context.Context, tx *sqlx.Tx, key string, actor Actor, action, hash string) (json.RawMessage, error) {
	if len(key) > MaxKeyLen {
		return nil, &ValidationError{Fields: map[string]string{"key": fmt.Sprintf("at most %d characters", MaxKeyLen)}}
	}
	var inserted string
	err := tx.GetContext(ctx, &inserted, `
		INSERT INTO action_keys (key, actor, action, request_hash, status, result) VALUES ($1, $2, $3, $4, 0, '{}')
		ON CONFLICT (key) DO NOTHING RETURNING key`, key, actor.Name, action, hash)
	if err == nil {
		return nil, nil
	}
	if translate(err) != ErrNotFound {
		return nil, fmt.Errorf("action key: %w", err)
	}
	var prior struct {
		Actor  string          `db:"actor"`
		Action string          `db:"action"`
		Hash   *string         `db:"request_hash"`
		Result json.RawMessage `db:"result"`
	}
	if err := tx.GetContext(ctx, &prior, `SELECT actor, action, request_hash, result FROM action_keys WHERE key = $1`, key); err != nil {
		return nil, fmt.Errorf("action key: %w", translate(err))
	}
	// A key stored without request_hash has no digest: only
	// its actor and action can be compared.
	if prior.Actor != actor.Name || prior.Action != action || (prior.Hash != nil && *prior.Hash != hash) {
		return nil, &KeyReuseError{}
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

// onceWithKey runs act inside tx unless key was used before for the same
// request (hash, from requestHash), in which case it decodes the earlier
// result into out and reports repeated = true.
func onceWithKey(ctx context.Context, tx *sqlx.Tx, key string, actor Actor, action, hash string, out any, act func() error) (repeated bool, err error) {
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
