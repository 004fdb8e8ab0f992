package dlq

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// RequestHash is the digest a key is bound to: what the request asked for
// (its action, its target, its body), as a list of values in a fixed order
// that each action chooses. JSON bodies inside it are canonicalised first
// (canonJSON), so the same body spelled with other spacing or key order is
// the same request.
func RequestHash(parts ...any) string {
	b, err := json.Marshal(parts)
	if err != nil {
		// Only values json cannot encode (NaN) get here; their text still
		// tells requests apart.
		b = fmt.Appendf(nil, "%#v", parts)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
