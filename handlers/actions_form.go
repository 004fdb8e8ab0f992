package handlers

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// Helpers the action forms share: one-time keys, ids, the refusal of
// people who may not act.

// versionStaleAfter is how recently a worker must have sent a heartbeat to
// count as live for the version warning: a minute is a dozen heartbeats,
// so a live worker is never missed and one stopped an hour ago never counts.
const versionStaleAfter = time.Minute

// newFormKey returns a one-time key for a form, made when the form is
// rendered. The action's transaction stores it, so a double click, a
// resubmitted form or a browser retry finds it and gets the first result
// back instead of acting twice. 128 random bits: no two forms ever share one.
func newFormKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "f-" + base64.RawURLEncoding.EncodeToString(b)
}

// parseLetterID reads the :id of a letter route.
func parseLetterID(c echo.Context) (int64, error) {
	return pathID(c, "A dead letter", "/dead-letters/1234")
}

// parseOperationID reads the :id of an operation route.
func parseOperationID(c echo.Context) (int64, error) {
	return pathID(c, "An operation", "/operations/12")
}

// parseJobID reads the :id of a job route.
func parseJobID(c echo.Context) (int64, error) {
	return pathID(c, "A job", "/jobs/1234")
}

// pathID reads a route's :id: digits only (strconv would also take "+1"),
// a positive number. Anything else is a 400 that shows what an id is.
func pathID(c echo.Context, what, example string) (int64, error) {
	s := c.Param("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || strings.HasPrefix(s, "+") {
		return 0, BadRequest("invalid_id", "%s id is a positive whole number, like %s; %q is not one.", what, example, s)
	}
	return id, nil
}

// mayAct refuses a requester whose role may not change letters, for the
// steps of an action that change nothing themselves (the confirmation
// page): the service refuses the change itself whatever happens here.
func mayAct(c echo.Context) error {
	a := ActorFrom(c)
	if a.Role.CanAct() {
		return nil
	}
	role := string(a.Role)
	if role == "" {
		role = "anonymous"
	}
	return &dlq.Error{Code: "forbidden",
		Message: "You may not do this: replaying and discarding need the operator or admin role, and you are " + role + "."}
}

// stateProblem words a letter that is not in the state an action needs,
// with the link that helps: the replay job, or nothing for a discard.
func stateProblem(err error) (msg, linkText, href string, ok bool) {
	var se *dlq.StateError
	if !errors.As(err, &se) {
		return "", "", "", false
	}
	l := se.Letter
	switch {
	case l.ReplayJobID != nil:
		return "This letter was already replayed", "as job " + strconv.FormatInt(*l.ReplayJobID, 10),
			"/jobs/" + strconv.FormatInt(*l.ReplayJobID, 10), true
	case l.DiscardedAt != nil && se.Action != "restore":
		return "This letter is discarded: restore it first, then " + se.Action + " it.", "", "", true
	default:
		return se.Error(), "", "", true
	}
}

// formText is a trimmed form value.
func formText(c echo.Context, name string) string { return strings.TrimSpace(c.FormValue(name)) }

// targetForm is a replay target as typed into a form, kept to show again
// beside its problems.
type targetForm struct {
	Queue, StartAt, MaxAttempts string
}

// formTarget reads a replay's target from a form (queue, start_at,
// max_attempts; all optional). A start time is UTC, as typed into a
// datetime-local field ("2026-12-07T18:30") or in RFC 3339. Problems are
// keyed by field, as dlq.ReplayTarget.Problems keys its own.
func formTarget(c echo.Context) (dlq.ReplayTarget, targetForm, map[string]string) {
	typed := targetForm{Queue: formText(c, "queue"), StartAt: formText(c, "start_at"), MaxAttempts: formText(c, "max_attempts")}
	t, problems := parseTarget(typed)
	return t, typed, problems
}

// parseTarget turns a typed target into a dlq.ReplayTarget; what cannot be
// read is a problem keyed by its field (the bounds are checked later, by
// dlq.ReplayTarget.Problems, where the API's are).
func parseTarget(typed targetForm) (dlq.ReplayTarget, map[string]string) {
	t := dlq.ReplayTarget{Queue: typed.Queue}
	problems := map[string]string{}
	if typed.StartAt != "" {
		at, err := parseStartAt(typed.StartAt)
		if err != nil {
			problems["start_at"] = err.Error()
		}
		t.StartAt = at
	}
	if typed.MaxAttempts != "" {
		n, err := strconv.Atoi(typed.MaxAttempts)
		if err != nil || n < 1 {
			problems["max_attempts"] = "a whole number of attempts, at least 1"
		}
		t.MaxAttempts = n
	}
	return t, problems
}

// parseStartAt reads a start time: RFC 3339, or a datetime-local value
// without a zone, taken as UTC.
func parseStartAt(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("a time such as 2026-12-07T18:30 (UTC) or 2026-12-07T18:30:00+01:00")
}
