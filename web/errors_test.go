package web

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/replay"
)

// TestClassifyMapsEachCodeToItsStatus is the code-to-status table read
// back through classify, with the errors that carry each code today.
func TestClassifyMapsEachCodeToItsStatus(t *testing.T) {
	replayed := int64(3)
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
	}{
		{"ValidationIsBadRequest", &dlq.ValidationError{Fields: map[string]string{"q": "bad"}}, http.StatusBadRequest, dlq.EInvalid},
		{"WrappedInvalidIsBadRequest", fmt.Errorf("%w: no such head", dlq.ErrInvalid), http.StatusBadRequest, dlq.EInvalid},
		{"BadRequestKeepsItsCode", handlers.BadRequest("invalid_filter", "bad filter"), http.StatusBadRequest, "invalid_filter"},
		{"UnconfirmedBulkIsBadRequest", &replay.ConfirmError{Expected: 2000}, http.StatusBadRequest, dlq.EConfirmationRequired},
		{"BadEditIsUnprocessable", &replay.EditError{Field: "args", Message: "not JSON"}, http.StatusUnprocessableEntity, dlq.EInvalidEdit},
		{"ReusedKeyIsUnprocessable", fmt.Errorf("replay: %w", &dlq.KeyReuseError{}), http.StatusUnprocessableEntity, dlq.EKeyReused},
		{"UnauthenticatedIs401", dlq.Errorf(dlq.EUnauthenticated, "sign in"), http.StatusUnauthorized, dlq.EUnauthenticated},
		{"BadTokenIs401", dlq.Errorf("invalid_token", "bad token"), http.StatusUnauthorized, "invalid_token"},
		{"CSRFIsForbidden", dlq.Errorf("csrf", "bad csrf"), http.StatusForbidden, "csrf"},
		{"RoleRefusalIsForbidden", dlq.Errorf(dlq.EForbidden, "You may not do this."), http.StatusForbidden, dlq.EForbidden},
		{"DisabledIsForbidden", dlq.Errorf("disabled", "disabled"), http.StatusForbidden, "disabled"},
		{"NotFoundIs404", fmt.Errorf("get: %w", dlq.ErrNotFound), http.StatusNotFound, dlq.ENotFound},
		{"WrongStateIsConflict", &dlq.StateError{Letter: dlq.DeadLetter{ID: 1, ReplayJobID: &replayed}}, http.StatusConflict, dlq.EConflict},
		{"NameTakenIsConflict", dlq.Errorf(dlq.EConflict, "there is already a user called bob"), http.StatusConflict, dlq.EConflict},
		{"UnreachableDatabaseIs503", dlq.ErrUnavailable, http.StatusServiceUnavailable, dlq.EUnavailable},
		{"EchoErrorKeepsItsStatus", echo.NewHTTPError(http.StatusRequestEntityTooLarge, "too big"), http.StatusRequestEntityTooLarge, "request_entity_too_large"},
		{"UnknownCodeIsInternal", dlq.Errorf("never_placed", "x"), http.StatusInternalServerError, dlq.EInternal},
		{"AnythingElseIsInternal", errors.New("boom"), http.StatusInternalServerError, dlq.EInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := classify(tt.err)
			if status != tt.wantStatus || body.Code != tt.wantCode {
				t.Errorf("classify(%v) = %d %q, want %d %q", tt.err, status, body.Code, tt.wantStatus, tt.wantCode)
			}
		})
	}
	// Every code in the table answers a client error or a server error
	// that is not the generic one, except internal itself.
	for code, status := range statusOf {
		if status < 400 || (status == http.StatusInternalServerError) != (code == dlq.EInternal) {
			t.Errorf("statusOf[%q] = %d", code, status)
		}
	}
}

// TestEveryCodeWrittenHasAStatus: a code the table does not know answers
// 500, so every code the handlers and web write by hand must be in it.
func TestEveryCodeWrittenHasAStatus(t *testing.T) {
	written := regexp.MustCompile(`(?:BadRequest\(|dlq\.Error\{Code: |dlq\.Errorf\()"([a-z_]+)"`)
	files, err := filepath.Glob("../handlers/*.go")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := filepath.Glob("*.go")
	seen := 0
	for _, f := range append(files, own...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range written.FindAllSubmatch(src, -1) {
			seen++
			if _, ok := statusOf[string(m[1])]; !ok && string(m[1]) != "never_placed" {
				t.Errorf("%s writes code %q, which statusOf does not know (it would answer 500)", f, m[1])
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d codes written: the pattern no longer matches the code", seen)
	}
}
