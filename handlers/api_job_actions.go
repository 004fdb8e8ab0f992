package handlers

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
)

// The job action API: POST /api/v1/jobs/{id}/{run-now,kill,cancel} and, in
// bulk, POST /api/v1/jobs/{run-now,kill} with {"ids": [...]} or
// {"filter": {...}}. Idempotency-Key is honoured as for letters; a job
// that is not (or no longer) in the state the action needs is a 409 whose
// message says what it is now; a viewer is refused (403).

type jobActionBody struct {
	Reason      string    `json:"reason"`
	Retry       bool      `json:"retry"`
	SeenState   dlq.State `json:"seen_state"`
	SeenAttempt *int      `json:"seen_attempt"`
}

// JobActionJSON answers an action on one job.
type JobActionJSON struct {
	dlq.JobActionResult
	Repeated bool `json:"repeated"`
}

// APIJobAction answers POST /api/v1/jobs/{id}/{run-now,kill,cancel} with
// body {reason?, retry? (cancel), seen_state?, seen_attempt?}.
func APIJobAction(svc JobActor, action dlq.JobAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayActOnJobs(c); err != nil {
			return err
		}
		id, err := parseJobID(c)
		if err != nil {
			return err
		}
		var b jobActionBody
		if err := decodeOptionalJSON(c, &b, "reason, retry, seen_state, seen_attempt"); err != nil {
			return err
		}
		if b.SeenState != "" && !b.SeenState.Valid() {
			return &dlq.ValidationError{Fields: map[string]string{"seen_state": "must be one of available, retrying, running, succeeded, dead"}}
		}
		res, err := svc.Act(c.Request().Context(), replay.JobRequest{Action: action, ID: id, SeenState: b.SeenState,
			SeenAttempt: b.SeenAttempt, Actor: ActorFrom(c), Reason: b.Reason, Retry: b.Retry,
			Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, JobActionJSON{JobActionResult: res, Repeated: res.Repeated})
	}
}

type jobFilterBody struct {
	State string `json:"state"`
	Queue string `json:"queue"`
	Task  string `json:"task"`
}

type jobsBulkBody struct {
	IDs    []int64        `json:"ids"`
	Filter *jobFilterBody `json:"filter"`
	Reason string         `json:"reason"`
	// MaxID bounds a filter to the jobs that existed when the client
	// looked (optional).
	MaxID int64 `json:"max_id"`
}

// JobsBulkJSON answers a bulk action on jobs.
type JobsBulkJSON struct {
	dlq.BulkJobResult
	Repeated bool `json:"repeated"`
}

// APIJobsBulk answers POST /api/v1/jobs/{run-now,kill} with {"ids": [...]}
// or {"filter": {"state", "queue", "task"}}, "reason" and "max_id"
// optional. No typed confirmation: the API caller chose the selection.
func APIJobsBulk(svc JobActor, action dlq.JobAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayActOnJobs(c); err != nil {
			return err
		}
		var b jobsBulkBody
		if err := decodeJSON(c, &b, "ids, filter, reason, max_id"); err != nil {
			return err
		}
		sel := dlq.JobSelection{IDs: b.IDs, MaxID: b.MaxID}
		switch {
		case (len(b.IDs) == 0) == (b.Filter == nil):
			return &dlq.ValidationError{Fields: map[string]string{"selection": "give either \"ids\" (a non-empty list) or \"filter\""}}
		case b.MaxID < 0:
			return &dlq.ValidationError{Fields: map[string]string{"max_id": "must be a job id"}}
		case b.Filter != nil:
			q := url.Values{}
			for k, v := range map[string]string{"state": b.Filter.State, "queue": b.Filter.Queue, "task": b.Filter.Task} {
				if v != "" {
					q.Set(k, v)
				}
			}
			f, err := ParseJobFilter(q)
			if err != nil {
				return err
			}
			f.Limit = 0
			sel.Filter = &f
		}
		for _, id := range b.IDs {
			if id <= 0 {
				return &dlq.ValidationError{Fields: map[string]string{"ids": "job ids are positive whole numbers"}}
			}
		}
		res, err := svc.ActOnMany(c.Request().Context(), replay.BulkJobRequest{Action: action, Selection: sel,
			Actor: ActorFrom(c), Reason: b.Reason, Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, JobsBulkJSON{BulkJobResult: res, Repeated: res.Repeated})
	}
}
