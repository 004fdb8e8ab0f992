package dlq

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/lib/pq"
)

// Sentinel errors returned by the store. Callers test them with errors.Is.
var (
	// ErrNotFound means the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a guarded change found the row in another state
	// than expected (already replayed, lease lost, duplicate key).
	ErrConflict = errors.New("conflict")
	// ErrInvalid means the input was rejected before anything changed.
	ErrInvalid = errors.New("invalid input")
	// ErrForbidden means the actor's role may not take the action.
	ErrForbidden = errors.New("forbidden")
)

// ValidationError lists what is wrong with an input, field by field. It
// matches ErrInvalid under errors.Is.
type ValidationError struct {
	Fields map[string]string
}

func (e *ValidationError) Error() string {
	msg := "invalid input"
	for _, k := range sortedKeys(e.Fields) {
		msg += fmt.Sprintf("; %s: %s", k, e.Fields[k])
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalid) true for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// As finds a ValidationError as an Error coded EInvalid.
func (e *ValidationError) As(target any) bool {
	return setError(target, &Error{Code: EInvalid, Message: e.Error(), Fields: e.Fields})
}

// IsInputError reports whether err is Postgres refusing a statement for
// the data it was given (SQLSTATE class 22, data exception, or 23,
// integrity constraint violation): running the same statement again fails
// the same way, unlike a lost connection or a timeout.
func IsInputError(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	class := pqErr.Code.Class()
	return class == "22" || class == "23"
}

// IsUnstorableText reports whether err is Postgres refusing text: a NUL
// byte (in text, or \u0000 in jsonb) or a byte sequence that is not UTF-8.
// The statement, and with it its transaction, did nothing.
func IsUnstorableText(err error) bool {
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	// character_not_in_repertoire (NUL, invalid UTF-8 in text),
	// untranslatable_character (\u0000 in jsonb)
	return pqErr.Code == "22021" || pqErr.Code == "22P05"
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
