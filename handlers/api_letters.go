package handlers

import (
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
	"attempts, max_attempts, history, reason, enqueued_at, failed_at)"

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
}

// APIReportOutcome answers POST /api/v1/letters/{id}/outcome: the system a
// letter came from (an HTTP source with a replay endpoint) says how the
// replay it was sent went: running, succeeded or died_again (with what
// killed it in message). The operation that replayed it settles on it. A
// token limited to some sources reports on their letters only.
func APIReportOutcome(store OutcomeReporter) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id < 1 {
			return NotFound("There is no dead letter %q.", dlq.ClipRunes(c.Param("id"), 40))
		}
		var req outcomeRequest
		if err := decodeJSON(c, &req, "state, message"); err != nil {
			return err
		}
		if len(req.Message) > dlq.MaxIngestMessage {
			return &dlq.ValidationError{Fields: map[string]string{"message": fmt.Sprintf("at most %d bytes", dlq.MaxIngestMessage)}}
		}
		report := dlq.OutcomeReport{LetterID: id, State: dlq.SourceReplayState(req.State), Message: req.Message}
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
