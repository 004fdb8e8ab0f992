package dlq

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/lib/pq"
)

func TestErrorCodeAndMessage(t *testing.T) {
	replayed := int64(9)
	tests := []struct {
		name        string
		err         error
		wantCode    string
		wantMessage string
		wantIs      error
	}{
		{"NilHasNoCode", nil, "", "", nil},
		{"CodedErrorKeepsItsMessageUnderWrapping", fmt.Errorf("create user: %w", Errorf(EConflict, "there is already a user called %s", "bob")),
			EConflict, "there is already a user called bob", ErrConflict},
		{"ValidationErrorIsInvalid", fmt.Errorf("parse: %w", &ValidationError{Fields: map[string]string{"q": "bad"}}),
			EInvalid, "invalid input; q: bad", ErrInvalid},
		{"StateErrorIsConflict", &StateError{Letter: DeadLetter{ID: 4, ReplayJobID: &replayed}, Action: "replay"},
			EConflict, "dead letter 4 was already replayed as job 9", ErrConflict},
		{"KeyReuseIsItsOwnCode", fmt.Errorf("act: %w", &KeyReuseError{}), EKeyReused,
			"Refused: " + (&KeyReuseError{}).Error() + ".", ErrInvalid},
		{"WrappedNotFoundSaysNotFound", fmt.Errorf("%w: there is no user called bob", ErrNotFound), ENotFound, "Not found.", ErrNotFound},
		{"ForbiddenMatchesTheSentinel", Errorf(EForbidden, "You may not do this."), EForbidden, "You may not do this.", ErrForbidden},
		{"LastAdminIsAConflict", fmt.Errorf("update user: %w", ErrLastAdmin), EConflict, "that would leave no active admin", ErrConflict},
		{"UnstorableTextIsInvalidText", fmt.Errorf("insert: %w", &pq.Error{Code: "22P05"}), EInvalidText, unstorableMessage, nil},
		{"UnreachableDatabaseIsUnavailable", fmt.Errorf("begin: %w", syscall.ECONNREFUSED), EUnavailable, UnavailableMessage, nil},
		{"AnythingElseIsInternalAndSaysNothing", errors.New("secret detail"), EInternal, "Internal error.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorCode(tt.err); got != tt.wantCode {
				t.Errorf("ErrorCode = %q, want %q", got, tt.wantCode)
			}
			if got := ErrorMessage(tt.err); got != tt.wantMessage {
				t.Errorf("ErrorMessage = %q, want %q", got, tt.wantMessage)
			}
			if tt.wantIs != nil && !errors.Is(tt.err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", tt.err, tt.wantIs)
			}
		})
	}
}
