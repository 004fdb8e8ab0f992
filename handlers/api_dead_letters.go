package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// The read API: the same store methods as the pages, as JSON. Errors go to
// the one error handler, which answers /api/ paths with
// {"error": {"code", "message", "fields"}}.

// LetterJSON is a dead letter as the API and the JSON export show it.
// It is its own type, not dlq.DeadLetter, so the API's shape is a decision
// rather than a side effect of the store's struct tags.
type LetterJSON struct {
	ID          int64           `json:"id"`
	JobID       int64           `json:"job_id"`
	Task        string          `json:"task"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Kwargs      json.RawMessage `json:"kwargs"`
	ErrorClass  string          `json:"error_class"`
	Error       string          `json:"error"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Reason      dlq.Reason      `json:"reason"`
	Status      dlq.Status      `json:"status"`
	Fingerprint string          `json:"fingerprint"`
	EnqueuedAt  time.Time       `json:"enqueued_at"`
	FailedAt    time.Time       `json:"failed_at"`
	ReplayOf    *int64          `json:"replay_of"`
	ReplayedAt  *time.Time      `json:"replayed_at"`
	ReplayJobID *int64          `json:"replay_job_id"`
	DiscardedAt *time.Time      `json:"discarded_at"`
	// Source is where the letter came from: redrive (Redrive's own queue)
	// or a source the operator named.
	Source string `json:"source"`
}

// LetterDetailJSON adds what only the single-letter endpoint returns.
type LetterDetailJSON struct {
	LetterJSON
	Traceback string `json:"traceback"`
	// TracebackTruncated: the traceback was longer than dlq.TracebackCap
	// characters and only its start is here.
	TracebackTruncated bool          `json:"traceback_truncated"`
	WorkerVersion      string        `json:"worker_version"`
	History            []dlq.Attempt `json:"history"`
	LaterLetters       []int64       `json:"later_letters"`
	// ExternalID is the letter's id in its source, for a letter another
	// system sent.
	ExternalID *string `json:"external_id,omitempty"`
}

func apiLetter(d dlq.DeadLetter) LetterJSON {
	return LetterJSON{
		ID: d.ID, JobID: d.JobID, Task: d.Task, Queue: d.Queue, Args: d.Args, Kwargs: d.Kwargs,
		ErrorClass: d.ErrorClass, Error: d.ErrorMessage, Attempts: d.Attempts, MaxAttempts: d.MaxAttempts,
		Reason: d.Reason, Status: d.Status, Fingerprint: d.Fingerprint, EnqueuedAt: d.EnqueuedAt, FailedAt: d.FailedAt,
		ReplayOf: d.ReplayOf, ReplayedAt: d.ReplayedAt, ReplayJobID: d.ReplayJobID, DiscardedAt: d.DiscardedAt,
		Source: cmp.Or(d.Source, dlq.RedriveSource),
	}
}

type apiLetterPage struct {
	Items      []LetterJSON `json:"items"`
	NextCursor *string      `json:"next_cursor"`
	// NotYetSearchable, only on a search (q), is how many letters were
	// written too recently to be searchable yet: search could not find
	// them, whatever they say.
	NotYetSearchable *int64 `json:"not_yet_searchable,omitempty"`
}

// APIDeadLetters answers GET /api/v1/dead-letters with one page of letters
// and the cursor of the next (null on the last page). The filters are the
// list page's (dlq.ParseFilter), defaults included: newest first, 50 per
// page, pending letters only unless status=all (or replayed, discarded).
func APIDeadLetters(store DeadLetterLister, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		f, err := ParseFilter(c.QueryParams(), now())
		if err == nil {
			err = maskedSearch(f, store.Masker(), "q")
		}
		if err != nil {
			return err
		}
		page, err := store.ListDeadLetters(ctx, f)
		if err != nil {
			return err
		}
		out := apiLetterPage{Items: make([]LetterJSON, 0, len(page.Letters))}
		for _, d := range page.Letters {
			out.Items = append(out.Items, apiLetter(d))
		}
		if page.Next != nil {
			s := page.Next.String()
			out.NextCursor = &s
		}
		if f.SearchesText() {
			out.NotYetSearchable = &page.NotYetSearchable
		}
		return c.JSON(http.StatusOK, out)
	}
}

// APIDeadLetter answers GET /api/v1/dead-letters/{id}.
func APIDeadLetter(store DeadLetterGetter) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		d, err := getLetter(ctx, store, c.Param("id"))
		if err != nil {
			return err
		}
		history := []dlq.Attempt(d.History)
		if history == nil {
			history = []dlq.Attempt{}
		}
		later := d.LaterLetters
		if later == nil {
			later = []int64{}
		}
		return c.JSON(http.StatusOK, LetterDetailJSON{
			LetterJSON: apiLetter(d.DeadLetter), Traceback: d.Traceback, TracebackTruncated: d.TracebackTruncated(),
			WorkerVersion: d.WorkerVersion, History: history, LaterLetters: later, ExternalID: d.ExternalID,
		})
	}
}

type apiGroup struct {
	dlq.ErrorGroup
	// Inflow is letters per day over the last dlq.SparkDays days, oldest first.
	Inflow []int64 `json:"inflow"`
}

// APIGroups answers GET /api/v1/groups?task=&sort=&limit= with the top
// error groups and their daily inflow. sort is the groups page's (pending,
// total, last_seen) or rate (api_groups_rate.go).
func APIGroups(store GroupLister, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		q, byRate := groupQuery(c.QueryParams())
		f, err := ParseGroupFilter(q)
		if err != nil {
			return groupSortHint(err)
		}
		limit := f.Limit
		if byRate {
			f.Limit = dlq.MaxGroupLimit
		}
		groups, spark, err := loadGroups(ctx, store, f, now())
		if err != nil {
			return err
		}
		if byRate {
			groups = byInflowRate(groups, spark, limit)
		}
		out := struct {
			Items []apiGroup `json:"items"`
		}{Items: make([]apiGroup, 0, len(groups))}
		for _, g := range groups {
			out.Items = append(out.Items, apiGroup{ErrorGroup: g, Inflow: spark[g.Fingerprint]})
		}
		return c.JSON(http.StatusOK, out)
	}
}
