package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
)

// LetterIngester takes in the letters another system sends (the store's
// sources room).
type LetterIngester interface {
	Ingest(ctx context.Context, source string, letters []dlq.IngestLetter) ([]dlq.IngestResult, error)
}

// ingestRequest is the body of POST /api/v1/letters: the source the
// letters come from, and the letters, one or a batch.
type ingestRequest struct {
	Source  string             `json:"source"`
	Letters []dlq.IngestLetter `json:"letters"`
}

const ingestFields = "source, letters (each with external_id, task, queue, args, kwargs, error_class, error, traceback, " +
	"attempts, max_attempts, history, reason, enqueued_at, failed_at, replay_of)"

// ingestResponse says what became of each letter, in the order sent.
type ingestResponse struct {
	Letters  []dlq.IngestResult `json:"letters"`
	Created  int                `json:"created"`
	Existing int                `json:"existing"`
}

// APIIngestLetters answers POST /api/v1/letters: letters that a task of
// another system (a configured source of kind http) failed for good, up to
// dlq.MaxIngestBatch at once. Each is checked (a 400 names every bad field
// of every letter, and nothing is stored), grouped, masked on every read
// like Redrive's own, and written once: a letter whose external id its
// source sent before is the same letter (201 when any is new, 200 when
// none is). A token limited to some sources sends theirs only.
func APIIngestLetters(store LetterIngester, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req ingestRequest
		if err := decodeJSON(c, &req, ingestFields); err != nil {
			return err
		}
		if p, ok := principal.From(c); ok && p.SendsOnly() && !slices.Contains(p.Sources, req.Source) {
			return &dlq.Error{Code: "forbidden", Message: fmt.Sprintf("This token sends the letters of %s only, not of %q.",
				strings.Join(p.Sources, ", "), dlq.ClipRunes(req.Source, 40))}
		}
		letters, err := req.normalise(now())
		if err != nil {
			return err
		}
		results, err := store.Ingest(c.Request().Context(), req.Source, letters)
		if err != nil {
			return err
		}
		res := ingestResponse{Letters: results}
		for _, r := range results {
			if r.Created {
				res.Created++
			} else {
				res.Existing++
			}
		}
		status := http.StatusOK
		if res.Created > 0 {
			status = http.StatusCreated
		}
		return c.JSON(status, res)
	}
}

// normalise checks the request and fills each letter's defaults; the
// problems of the letters are named letters[i].field.
func (r ingestRequest) normalise(now time.Time) ([]dlq.IngestLetter, error) {
	problems := map[string]string{}
	if msg := dlq.SourceNameProblem(r.Source); msg != "" {
		problems["source"] = msg
	}
	switch n := len(r.Letters); {
	case n == 0:
		problems["letters"] = "send at least one letter"
	case n > dlq.MaxIngestBatch:
		problems["letters"] = fmt.Sprintf("at most %s letters per request, got %d; split the batch", strconv.Itoa(dlq.MaxIngestBatch), n)
	}
	if len(problems) > 0 {
		return nil, &dlq.ValidationError{Fields: problems}
	}
	out := make([]dlq.IngestLetter, len(r.Letters))
	for i, l := range r.Letters {
		var err error
		out[i], err = l.Normalise(now)
		var ve *dlq.ValidationError
		if errors.As(err, &ve) {
			for k, msg := range ve.Fields {
				problems[fmt.Sprintf("letters[%d].%s", i, k)] = msg
			}
		}
	}
	if len(problems) > 0 {
		return nil, &dlq.ValidationError{Fields: problems}
	}
	return out, nil
}

// OutcomeReporter records how a replay sent to another system went (the
// store's operations room).
type OutcomeReporter interface {
	ReportReplayOutcome(ctx context.Context, p dlq.OutcomeReport) (dlq.OutcomeResult, error)
}

// outcomeRequest is the body of POST /api/v1/letters/{id}/outcome.
type outcomeRequest struct {
	State   string `json:"state"`
	Message string `json:"message"`
	JobRef  string `json:"job_ref"`
}

// APIReportOutcome answers POST /api/v1/letters/{id}/outcome: the system a
// letter came from (an HTTP source with a replay endpoint, a Celery app)
// says how the replay it was sent went: sent (published, job_ref naming
// its job), running, succeeded or died_again (with what killed it in
// message). The operation that replayed it settles on it. A
// token limited to some sources reports on their letters only.
func APIReportOutcome(store OutcomeReporter) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id < 1 {
			return NotFound("There is no dead letter %q.", dlq.ClipRunes(c.Param("id"), 40))
		}
		var req outcomeRequest
		if err := decodeJSON(c, &req, "state, message, job_ref"); err != nil {
			return err
		}
		if len(req.Message) > dlq.MaxIngestMessage {
			return &dlq.ValidationError{Fields: map[string]string{"message": fmt.Sprintf("at most %d bytes", dlq.MaxIngestMessage)}}
		}
		report := dlq.OutcomeReport{LetterID: id, State: dlq.SourceReplayState(req.State), Message: req.Message, JobRef: req.JobRef}
		if p, ok := principal.From(c); ok && p.SendsOnly() {
			report.Sources = p.Sources
		}
		res, err := store.ReportReplayOutcome(c.Request().Context(), report)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
}

// ReplayTaker leases the due replays of a source whose workers take their
// replays from Redrive (the store's operations room).
type ReplayTaker interface {
	TakeReplays(ctx context.Context, source string, limit int, lease time.Duration) ([]dlq.TakenReplay, error)
}

// takeRequest is the body of POST /api/v1/sources/{name}/replays/take.
type takeRequest struct {
	Limit        int `json:"limit"`
	LeaseSeconds int `json:"lease_seconds"`
}

// APITakeReplays answers POST /api/v1/sources/{name}/replays/take: a worker
// of a source that publishes its own replays (a Celery app's) takes up to
// limit due ones (default 20, at most 100), leased to it for lease_seconds
// (default 60, at most 600); it publishes each and reports it sent
// (POST /api/v1/letters/{id}/outcome). A token limited to some sources
// takes theirs only.
func APITakeReplays(store ReplayTaker) echo.HandlerFunc {
	return func(c echo.Context) error {
		source := c.Param("name")
		var req takeRequest
		if err := decodeJSON(c, &req, "limit, lease_seconds"); err != nil {
			return err
		}
		problems := map[string]string{}
		if req.Limit < 0 || req.Limit > dlq.MaxTakeReplays {
			problems["limit"] = fmt.Sprintf("from 1 to %d (0: 20)", dlq.MaxTakeReplays)
		}
		if max := int(dlq.MaxTakeLease / time.Second); req.LeaseSeconds < 0 || req.LeaseSeconds > max || (req.LeaseSeconds > 0 && req.LeaseSeconds < 5) {
			problems["lease_seconds"] = fmt.Sprintf("from 5 to %d (0: %d)", max, int(dlq.DefaultTakeLease/time.Second))
		}
		if len(problems) > 0 {
			return &dlq.ValidationError{Fields: problems}
		}
		if p, ok := principal.From(c); ok && p.SendsOnly() && !slices.Contains(p.Sources, source) {
			return &dlq.Error{Code: "forbidden", Message: fmt.Sprintf("This token takes the replays of %s only, not of %q.",
				strings.Join(p.Sources, ", "), dlq.ClipRunes(source, 40))}
		}
		limit, lease := cmp.Or(req.Limit, 20), cmp.Or(time.Duration(req.LeaseSeconds)*time.Second, dlq.DefaultTakeLease)
		replays, err := store.TakeReplays(c.Request().Context(), source, limit, lease)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"replays": replays, "lease_seconds": int(lease / time.Second)})
	}
}
