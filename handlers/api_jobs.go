package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// jobRequest is one job in an enqueue request body. Unknown fields are
// refused, so a misspelt "max_atempts" is an error rather than a default.
type jobRequest struct {
	Task           string          `json:"task"`
	Queue          string          `json:"queue"`
	Args           json.RawMessage `json:"args"`
	Kwargs         json.RawMessage `json:"kwargs"`
	IdempotencyKey string          `json:"idempotency_key"`
	// MaxAttempts is a pointer so that an explicit 0 is refused instead of
	// silently becoming the default.
	MaxAttempts *int       `json:"max_attempts"`
	RunAt       *time.Time `json:"run_at"`
	// TimeoutSeconds limits each attempt of this job (a worker's
	// --job-timeout still caps it).
	TimeoutSeconds *float64 `json:"timeout_seconds"`
}

const jobRequestFields = "task, queue, args, kwargs, idempotency_key, max_attempts, run_at, timeout_seconds"

// params converts the request to store params; prefix names the job in
// field errors ("jobs[3].").
func (r jobRequest) params(prefix string) (dlq.EnqueueParams, map[string]string) {
	p := dlq.EnqueueParams{
		Task: r.Task, Queue: r.Queue, Args: r.Args, Kwargs: r.Kwargs, IdempotencyKey: r.IdempotencyKey,
	}
	if r.MaxAttempts != nil {
		if *r.MaxAttempts < 1 {
			return p, map[string]string{prefix + "max_attempts": fmt.Sprintf("must be between 1 and %d", dlq.MaxMaxAttempts)}
		}
		p.MaxAttempts = *r.MaxAttempts
	}
	if r.RunAt != nil {
		p.RunAt = *r.RunAt
	}
	if s := r.TimeoutSeconds; s != nil {
		if *s < 0.001 || *s > dlq.MaxJobTimeout.Seconds() {
			return p, map[string]string{prefix + "timeout_seconds": fmt.Sprintf("must be between 0.001 and %.0f", dlq.MaxJobTimeout.Seconds())}
		}
		p.Timeout = time.Duration(*s * float64(time.Second))
	}
	return p, nil
}

// JobGetter reads one job.
type JobGetter interface {
	Job(ctx context.Context, id int64) (dlq.Job, error)
}

// APIJob answers GET /api/v1/jobs/{id} with the job as JSON.
func APIJob(store JobGetter) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseJobID(c)
		if err != nil {
			return err
		}
		job, err := store.Job(c.Request().Context(), id)
		if errors.Is(err, dlq.ErrNotFound) {
			return NotFound("no job has id %d", id)
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, job)
	}
}

// JobEnqueuer enqueues one job.
type JobEnqueuer interface {
	Enqueue(ctx context.Context, p dlq.EnqueueParams) (dlq.EnqueueResult, error)
}

// APIEnqueueJob answers POST /api/v1/jobs: 201 with the new job, or 200
// with the earlier job when its idempotency key was used before.
func APIEnqueueJob(store JobEnqueuer) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req jobRequest
		if err := decodeJSON(c, &req, jobRequestFields); err != nil {
			return err
		}
		p, problems := req.params("")
		if problems != nil {
			return &dlq.ValidationError{Fields: problems}
		}
		res, err := store.Enqueue(c.Request().Context(), p)
		if err != nil {
			return err
		}
		status := http.StatusCreated
		if res.Existing {
			status = http.StatusOK
		}
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/jobs/"+strconv.FormatInt(res.Job.ID, 10))
		return c.JSON(status, res.Job)
	}
}

// BatchEnqueuer enqueues many jobs all or nothing.
type BatchEnqueuer interface {
	EnqueueMany(ctx context.Context, params []dlq.EnqueueParams) ([]int64, error)
}

type batchRequest struct {
	Jobs []jobRequest `json:"jobs"`
}

type batchResponse struct {
	IDs []int64 `json:"ids"`
}

// APIEnqueueBatch answers POST /api/v1/jobs/batch: up to dlq.MaxBatch jobs
// in one transaction, all or nothing, 201 with their ids in request order.
func APIEnqueueBatch(store BatchEnqueuer) echo.HandlerFunc {
	return func(c echo.Context) error {
		var req batchRequest
		if err := decodeJSON(c, &req, "jobs (each with "+jobRequestFields+")"); err != nil {
			return err
		}
		if len(req.Jobs) > dlq.MaxBatch {
			return &dlq.ValidationError{Fields: map[string]string{
				"jobs": fmt.Sprintf("at most %s jobs per batch, got %d; split the batch", strconv.Itoa(dlq.MaxBatch), len(req.Jobs)),
			}}
		}
		params := make([]dlq.EnqueueParams, len(req.Jobs))
		for i, j := range req.Jobs {
			p, problems := j.params(fmt.Sprintf("jobs[%d].", i))
			if problems != nil {
				return &dlq.ValidationError{Fields: problems}
			}
			params[i] = p
		}
		ids, err := store.EnqueueMany(c.Request().Context(), params)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, batchResponse{IDs: ids})
	}
}

// decodeJSON reads the whole body into dst, refusing unknown fields and
// trailing data. Every failure is a 400 that says what and where, except a
// body over the size limit, which the limit middleware turns into 413.
func decodeJSON(c echo.Context, dst any, known string) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("empty_body", "the request body is empty; send a JSON object")
	}
	return decodeBody(body, dst, known)
}

// readBody reads the whole request body.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he // 413 from the body limit
		}
		return nil, BadRequest("unreadable_body", "could not read the request body: %v", err)
	}
	return body, nil
}

// decodeBody is the one JSON decoding rule of the API: strict (unknown
// fields, fields named in another case, keys given twice, malformed JSON
// and trailing data are 400s that say where).
func decodeBody(body []byte, dst any, known string) error {
	if err := checkStrict(body, reflect.TypeOf(dst)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(body, err, known)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		line, col := position(body, dec.InputOffset())
		return BadRequest("malformed_json", "unexpected data after the JSON object at line %d, column %d", line, col)
	}
	return nil
}

// jsonError turns a decoding error into a 400 that points at the problem.
func jsonError(body []byte, err error, known string) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var tpe *time.ParseError
	switch {
	case errors.As(err, &syn):
		// Offset counts the bytes read up to and including the bad one.
		line, col := position(body, syn.Offset-1)
		return BadRequest("malformed_json", "malformed JSON at line %d, column %d: %s", line, col, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		line, col := position(body, typ.Offset)
		field := typ.Field
		if field == "" {
			return BadRequest("malformed_json", "the body must be a JSON object, not %s", jsonValueName(typ.Value))
		}
		return &dlq.ValidationError{Fields: map[string]string{
			field: fmt.Sprintf("must be %s, not %s (line %d, column %d)", jsonTypeName(typ.Type.String()), jsonValueName(typ.Value), line, col),
		}}
	case errors.As(err, &tpe):
		return BadRequest("invalid_time", "times are RFC 3339 strings like 2026-11-29T14:05:00Z; %q is not one", tpe.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("malformed_json", "malformed JSON: the body ends before the JSON does (%d bytes read)", len(body))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &dlq.ValidationError{Fields: map[string]string{
			name: "unknown field; the known fields are " + known,
		}}
	default:
		return BadRequest("malformed_json", "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonTypeName says a Go type the way a JSON client thinks of it.
func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "int"):
		return "a whole number"
	case goType == "string":
		return "a string"
	case strings.Contains(goType, "Time"):
		return "an RFC 3339 time string"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"):
		return "a JSON object"
	default:
		return "another kind of JSON value"
	}
}

// jsonValueName names what a client sent, as encoding/json reports it
// ("string", "number 1e999", "array", ...), with its article.
func jsonValueName(v string) string {
	switch {
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	case v == "array", v == "object":
		return "an " + v
	case v == "":
		return "that value"
	default:
		return "a " + v
	}
}

// position converts a byte offset into a 1-based line and column.
func position(body []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(body)))
	before := body[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}
