package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/replay"
)

// The action API: the same replay.Service as the pages, as JSON. Errors go
// to the one error handler: an invalid edit is 422 with the parse error, a
// letter already replayed 409 with its replay_job_id, a discarded one 409,
// a missing reason 400, a viewer 403. The optional Idempotency-Key header
// is the action's one-time key: the same key again with the same request
// returns the first answer and does nothing twice; the same key with
// another request (another letter, action or body) is 422.

// idempotencyKey is the header a client sets to make a retry safe.
const idempotencyKey = "Idempotency-Key"

// BulkAPI is what the bulk endpoints need (replay.Service).
type BulkAPI interface {
	StartBulk(ctx context.Context, r replay.BulkRequest) (dlq.Operation, error)
	Wait(ctx context.Context, id int64, timeout time.Duration) (dlq.Operation, error)
}

// Waiting for a bulk operation: by default an API call waits this long
// for the operation to finish, and never longer than maxWait, well inside
// the server's write timeout.
const (
	defaultWait = 30 * time.Second
	maxWait     = 120 * time.Second
)

type replayBody struct {
	Args   json.RawMessage `json:"args"`
	Kwargs json.RawMessage `json:"kwargs"`
	Reason string          `json:"reason"`
	targetBody
}

// targetBody is a replay's target as the API takes it: another queue, a
// start time (RFC 3339) and a maximum of attempts, each optional.
type targetBody struct {
	Queue       string     `json:"queue"`
	StartAt     *time.Time `json:"start_at"`
	MaxAttempts int        `json:"max_attempts"`
}

func (b targetBody) target() dlq.ReplayTarget {
	t := dlq.ReplayTarget{Queue: strings.TrimSpace(b.Queue), MaxAttempts: b.MaxAttempts}
	if b.StartAt != nil {
		t.StartAt = *b.StartAt
	}
	return t
}

// ReplayJSON answers a replay.
type ReplayJSON struct {
	ReplayJobID  int64 `json:"replay_job_id"`
	AuditEventID int64 `json:"audit_event_id"`
	// Repeated: the Idempotency-Key had been used; this is the first answer.
	Repeated bool `json:"repeated"`
}

// APIReplay answers POST /api/v1/dead-letters/{id}/replay with body
// {args?, kwargs?, reason?}: args and kwargs, when given, replace the
// letter's in the replayed job.
func APIReplay(svc LetterActor) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		var b replayBody
		if err := decodeOptionalJSON(c, &b, "args, kwargs, reason, queue, start_at, max_attempts"); err != nil {
			return err
		}
		res, err := svc.Replay(c.Request().Context(), replay.ReplayRequest{ID: id, Actor: ActorFrom(c),
			Args: rawText(b.Args), Kwargs: rawText(b.Kwargs), Reason: b.Reason, Target: b.target(),
			Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, ReplayJSON{ReplayJobID: res.JobID, AuditEventID: res.AuditID, Repeated: res.Repeated})
	}
}

// rawText is an edited value as the service takes it: nil when absent or
// null (keep the letter's), else the JSON text, which the service checks.
func rawText(raw json.RawMessage) *string {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	s := string(raw)
	return &s
}

type reasonBody struct {
	Reason string `json:"reason"`
}

// LetterChangeJSON answers a discard or a restore.
type LetterChangeJSON struct {
	DeadLetterID int64      `json:"dead_letter_id"`
	Status       dlq.Status `json:"status"`
	AuditEventID int64      `json:"audit_event_id"`
}

// discardBody is a discard's request: its reason, and whether to delete
// the letter's job in its source too (a River job).
type discardBody struct {
	Reason         string `json:"reason"`
	DeleteInSource bool   `json:"delete_in_source"`
}

// APIDiscard answers POST /api/v1/dead-letters/{id}/discard {reason,
// delete_in_source?}; the reason is required (400 without it).
func APIDiscard(svc LetterActor) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		var b discardBody
		if err := decodeOptionalJSON(c, &b, "reason, delete_in_source"); err != nil {
			return err
		}
		auditID, err := svc.Discard(c.Request().Context(), replay.DiscardRequest{ID: id, Actor: ActorFrom(c), Reason: b.Reason,
			Key: c.Request().Header.Get(idempotencyKey), DeleteInSource: b.DeleteInSource})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, LetterChangeJSON{DeadLetterID: id, Status: dlq.StatusDiscarded, AuditEventID: auditID})
	}
}

// APIRestore answers POST /api/v1/dead-letters/{id}/restore {reason?}.
func APIRestore(svc LetterActor) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		reason, err := optionalReason(c)
		if err != nil {
			return err
		}
		auditID, err := svc.Restore(c.Request().Context(), id, ActorFrom(c), reason, c.Request().Header.Get(idempotencyKey))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, LetterChangeJSON{DeadLetterID: id, Status: dlq.StatusPending, AuditEventID: auditID})
	}
}

// bulkBody is the body of POST /api/v1/dead-letters/{replay,discard}.
type bulkBody struct {
	IDs           []int64     `json:"ids"`
	Filter        *bulkFilter `json:"filter"`
	DryRun        bool        `json:"dry_run"`
	RatePerSecond float64     `json:"rate_per_second"`
	Canary        int         `json:"canary"`
	Reason        string      `json:"reason"`
	WaitSeconds   *float64    `json:"wait_seconds"`
	targetBody
}

// bulkFilter is the list's filter (dlq.Filter) as the API takes it. Only pending
// letters are ever selected: the others could not be acted on anyway.
type bulkFilter struct {
	Task        string `json:"task"`
	Queue       string `json:"queue"`
	Reason      string `json:"reason"`
	ErrorClass  string `json:"error_class"`
	Q           string `json:"q"`
	Since       string `json:"since"`
	Until       string `json:"until"`
	Fingerprint string `json:"fingerprint"`
	Source      string `json:"source"`
}

const bulkFields = "ids, filter, dry_run, rate_per_second, canary, reason, wait_seconds, queue, start_at, max_attempts"

// selection turns the body's ids or filter into a store selection. The
// filter's fields become the store's typed filter directly (pending
// letters only, relative times resolved against now) and are held to its
// Validate; problems are named filter.<field>.
func (b bulkBody) selection(now time.Time) (dlq.Selection, error) {
	if b.Filter == nil {
		return dlq.Selection{IDs: b.IDs}, nil
	}
	f, err := b.Filter.filter(now)
	var ve *dlq.ValidationError
	if errors.As(err, &ve) {
		fields := map[string]string{}
		for k, msg := range ve.Fields {
			fields["filter."+k] = msg
		}
		return dlq.Selection{}, &dlq.ValidationError{Fields: fields}
	}
	if err != nil {
		return dlq.Selection{}, err
	}
	return dlq.Selection{IDs: b.IDs, Filter: &f}, nil
}

// filter is the body's filter as the store's, over pending letters.
func (b bulkFilter) filter(now time.Time) (dlq.Filter, error) {
	trim := strings.TrimSpace
	problems := map[string]string{}
	f := dlq.Filter{Task: trim(b.Task), Queue: trim(b.Queue), Reason: dlq.Reason(trim(b.Reason)), Status: dlq.StatusPending,
		ErrorClass: trim(b.ErrorClass), Q: trim(b.Q), Source: trim(b.Source)}
	if fp := trim(b.Fingerprint); fp != "" {
		groups, _ := parseGroups([]string{fp}) // one parameter: no problem to report
		if len(groups) == 1 {
			f.Fingerprint = groups[0]
		} else {
			f.Fingerprints = groups
		}
	}
	f.Since, f.Until = parseTimeRange(trim(b.Since), trim(b.Until), now, problems)
	return f, validated(f.Validate(), problems)
}

// wait is how long the call waits for the operation to finish.
func (b bulkBody) wait() (time.Duration, error) {
	if b.WaitSeconds == nil {
		return defaultWait, nil
	}
	w := time.Duration(*b.WaitSeconds * float64(time.Second))
	if w < 0 || w > maxWait {
		return 0, &dlq.ValidationError{Fields: map[string]string{"wait_seconds": fmt.Sprintf("must be between 0 and %d", int(maxWait.Seconds()))}}
	}
	return w, nil
}

// OperationJSON is a bulk operation as the API shows it. Replayed or
// Discarded (whichever the kind) counts the letters acted on.
type OperationJSON struct {
	OperationID   *int64            `json:"operation_id"`
	URL           string            `json:"url,omitempty"`
	Kind          dlq.OperationKind `json:"kind"`
	State         string            `json:"state"`
	DryRun        bool              `json:"dry_run,omitempty"`
	Matched       int64             `json:"matched"`
	Replayed      *int64            `json:"replayed,omitempty"`
	Discarded     *int64            `json:"discarded,omitempty"`
	Skipped       int64             `json:"skipped"`
	MaxID         int64             `json:"max_id"`
	Actor         string            `json:"actor,omitempty"`
	Reason        string            `json:"reason,omitempty"`
	RatePerSecond *float64          `json:"rate_per_second,omitempty"`
	Canary        int               `json:"canary,omitempty"`
	CanaryJobs    []dlq.JobOutcome  `json:"canary_jobs,omitempty"`
	// Queue, StartAt and MaxAttempts are where, from when and with how
	// many attempts a replay's jobs run, when not as each letter ran.
	Queue       *string    `json:"queue,omitempty"`
	StartAt     *time.Time `json:"start_at,omitempty"`
	MaxAttempts *int       `json:"max_attempts,omitempty"`
	// Replays is where a replay's jobs are: waiting, running, succeeded,
	// died again (the second phase; the operation is done once none wait
	// or run). DiedAgainPercent is its died-again guard, when it has one.
	Replays            *dlq.ReplayCounts `json:"replays,omitempty"`
	DiedAgainPercent   *float64          `json:"died_again_percent,omitempty"`
	StoppedFollowingBy *string           `json:"stopped_following_by,omitempty"`
	AuditEventID       *int64            `json:"audit_event_id,omitempty"`
	Error              *string           `json:"error,omitempty"`
	CreatedAt          *time.Time        `json:"created_at,omitempty"`
	FinishedAt         *time.Time        `json:"finished_at,omitempty"`
}

func apiOperation(op dlq.Operation, jobs []dlq.JobOutcome) OperationJSON {
	done := op.Done
	out := OperationJSON{Kind: op.Kind, State: string(op.State), Matched: op.Matched, Skipped: op.Skipped,
		MaxID: op.MaxID, Actor: op.Actor, Reason: op.Reason, RatePerSecond: op.RatePerSecond, Canary: op.Canary,
		CanaryJobs: jobs, AuditEventID: op.AuditEventID, Error: op.Error, FinishedAt: op.FinishedAt,
		Replays: op.Replays, DiedAgainPercent: op.DiedAgainPercent, StoppedFollowingBy: op.StoppedFollowingBy,
		Queue: op.TargetQueue, StartAt: op.StartAt, MaxAttempts: op.TargetMaxAttempts}
	if op.Kind == dlq.OpReplay && op.Replays == nil && op.ID != 0 {
		out.Replays = &dlq.ReplayCounts{} // not counted yet: none settled
	}
	if op.ID != 0 {
		id, created := op.ID, op.CreatedAt
		out.OperationID, out.URL, out.CreatedAt = &id, fmt.Sprintf("/operations/%d", op.ID), &created
	}
	if op.Kind == dlq.OpDiscard {
		out.Discarded = &done
	} else {
		out.Replayed = &done
	}
	return out
}

// operationStatus is 200 once an operation will do nothing more, 202
// while it runs, settles or waits for a decision.
func operationStatus(op dlq.Operation) int {
	if op.State.Finished() {
		return http.StatusOK
	}
	return http.StatusAccepted
}

// APIBulk answers POST /api/v1/dead-letters/replay and .../discard: it
// starts the operation, waits up to wait_seconds (default 30, at most 120)
// for the runner to finish it, and answers 200 when done or 202 while it
// still runs (follow it at GET /api/v1/operations/{id}). dry_run answers
// the counts at once and changes nothing.
func APIBulk(svc BulkAPI, kind dlq.OperationKind, masker mask.Policy, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		var b bulkBody
		if err := decodeJSON(c, &b, bulkFields); err != nil {
			return err
		}
		sel, err := b.selection(now())
		if err == nil && sel.Filter != nil {
			err = maskedSearch(*sel.Filter, masker, "filter.q")
		}
		if err != nil {
			return err
		}
		wait, err := b.wait()
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: kind, Selection: sel, Actor: ActorFrom(c), Reason: b.Reason,
			RatePerSecond: b.RatePerSecond, Canary: b.Canary, Target: b.target(), DryRun: b.DryRun, Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		if b.DryRun {
			out := apiOperation(op, nil)
			out.State, out.DryRun = "dry_run", true
			return c.JSON(http.StatusOK, out)
		}
		if wait > 0 && !op.State.Finished() {
			if op, err = svc.Wait(ctx, op.ID, wait); err != nil {
				return err
			}
		}
		return c.JSON(operationStatus(op), apiOperation(op, nil))
	}
}

// APIOperation answers GET /api/v1/operations/{id}: 200 once finished,
// 202 while running; a canary's jobs come with their states.
func APIOperation(store OperationReader) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseOperationID(c)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		op, err := store.Operation(ctx, id)
		if err != nil {
			return err
		}
		var jobs []dlq.JobOutcome
		if op.Canary > 0 {
			if jobs, err = store.OperationJobs(ctx, op.ID, op.Canary); err != nil {
				return err
			}
		}
		if op.Replays, err = replaysOf(ctx, store, op); err != nil {
			return err
		}
		return c.JSON(operationStatus(op), apiOperation(op, jobs))
	}
}

// APIChangeOperation answers POST /api/v1/operations/{id}/cancel and
// .../release with the operation as it is after the change; an operation
// that cannot change so (already finished, not at its canary) is 409.
// Idempotency-Key is honoured: a retry is the first answer, not a 409.
func APIChangeOperation(change func(context.Context, int64, replay.Actor, string) (dlq.Operation, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseOperationID(c)
		if err != nil {
			return err
		}
		if err := decodeOptionalJSON(c, &struct{}{}, "none (send an empty body or {})"); err != nil {
			return err
		}
		op, err := change(c.Request().Context(), id, ActorFrom(c), c.Request().Header.Get(idempotencyKey))
		if err != nil {
			return err
		}
		return c.JSON(operationStatus(op), apiOperation(op, nil))
	}
}
