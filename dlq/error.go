package dlq

import (
	"errors"
	"fmt"
)

// Error codes: the one vocabulary every layer speaks when something goes
// wrong. The web layer maps each code to an HTTP status in one table; the
// code itself is the "code" of an API error body, so a code never changes
// once clients have seen it.
const (
	// EInvalid: the input was rejected before anything changed.
	EInvalid = "invalid"
	// ENotFound: the thing asked for does not exist.
	ENotFound = "not_found"
	// EConflict: the thing is in another state than the change needs.
	EConflict = "conflict"
	// EForbidden: the actor may not do this.
	EForbidden = "forbidden"
	// EUnauthenticated: nobody is signed in, or the session has ended.
	EUnauthenticated = "unauthenticated"
	// EUnavailable: the database cannot be reached; the same request may
	// succeed later.
	EUnavailable = "database_unavailable"
	// EInternal: anything not foreseen. Its message is never shown.
	EInternal = "internal"

	// EInvalidEdit: an edited argument is not valid JSON of the right
	// shape (well-formed request, unprocessable content).
	EInvalidEdit = "invalid_edit"
	// EConfirmationRequired: a large bulk action was not confirmed.
	EConfirmationRequired = "confirmation_required"
	// EKeyReused: a one-time key came back with another request.
	EKeyReused = "idempotency_key_reused"
	// EInvalidText: text the database cannot store (NUL, not UTF-8).
	EInvalidText = "invalid_text"
)

// Error is a coded domain error (WTF Dial's wtf.Error): Code says what kind
// of failure it is, for programs; Message says what happened, safe to show
// to the person who asked; Fields says what is wrong with which input.
//
// An Error with a code of the old sentinels matches them under errors.Is
// (a conflict is ErrConflict), so callers that test those keep working.
type Error struct {
	Code    string
	Message string
	Fields  map[string]string
}

// Error returns the message alone: wrapping adds the context.
func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, ErrConflict), ErrNotFound, ErrInvalid and
// ErrForbidden and ErrUnavailable true for an Error of the matching code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case EConflict:
		return target == ErrConflict
	case ENotFound:
		return target == ErrNotFound
	case EInvalid, EKeyReused, EInvalidText, EInvalidEdit:
		return target == ErrInvalid
	case EForbidden:
		return target == ErrForbidden
	case EUnavailable:
		return target == ErrUnavailable
	}
	return false
}

// Errorf returns an Error with code and a message formatted as fmt.Sprintf
// does.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// setError is the As method of the typed errors that carry more than a
// code (the letter a conflict found, the pause in the way): errors.As(err,
// &e) with e a *Error finds them as the coded error they are.
func setError(target any, e *Error) bool {
	t, ok := target.(**Error)
	if ok {
		*t = e
	}
	return ok
}

// Messages for failures whose words do not come from the error itself.
const (
	notFoundMessage = "Not found."
	// UnavailableMessage is what a request that failed because the
	// database could not be reached is told.
	UnavailableMessage = "The database is unreachable right now, so this request could not be completed. " +
		"Nothing is wrong with the request: try again in a few seconds."
	unstorableMessage = "The request holds a NUL byte or text that is not valid UTF-8, which cannot be stored; nothing was changed."
)

// asError finds the coded error in err's chain, or makes one for the old
// sentinels and the driver's failures that carry no code of their own.
// The order matters: a typed error in the chain wins over the sentinels it
// matches, and an unreachable database is said only when nothing more
// precise is known.
func asError(err error) *Error {
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return e
	case IsUnstorableText(err):
		// A NUL escaped in a JSON body (\u0000) that only the database
		// refused; its transaction rolled back.
		return &Error{Code: EInvalidText, Message: unstorableMessage}
	case errors.Is(err, ErrNotFound):
		return &Error{Code: ENotFound, Message: notFoundMessage}
	case errors.Is(err, ErrConflict):
		return &Error{Code: EConflict, Message: err.Error()}
	case errors.Is(err, ErrInvalid):
		return &Error{Code: EInvalid, Message: err.Error()}
	case IsUnavailable(err):
		return &Error{Code: EUnavailable, Message: UnavailableMessage}
	}
	return nil
}

// ErrorCode returns the code of err: the Code of the Error in its chain,
// the code of a sentinel it wraps, "" for nil and EInternal for anything
// else.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	if e := asError(err); e != nil {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns what err says to the person who asked: the Message
// of the Error in its chain, without the context that wrapped it. It is
// "Internal error." for an error with no code: its words may hold details
// that are only for the log.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	if e := asError(err); e != nil {
		return e.Message
	}
	return "Internal error."
}

// ErrorFields returns what is wrong with which input, when err says.
func ErrorFields(err error) map[string]string {
	if e := asError(err); e != nil {
		return e.Fields
	}
	return nil
}
