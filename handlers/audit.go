package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// The audit trail: /audit (filters in the query string, keyset pages),
// one entry with the letters it touched, and the API's view of the same.

// AuditReader is what the audit pages read.
type AuditReader interface {
	AuditLister
	GetAuditEntry(ctx context.Context, id int64) (dlq.AuditEntry, error)
	AuditLetters(ctx context.Context, id, after int64, limit int) ([]dlq.AuditLetter, int64, error)
	ReplayOutcomes(ctx context.Context, letterIDs []int64) (map[int64]dlq.ReplayOutcome, error)
}

// auditLettersPage is how many letters an entry's page lists at once.
const auditLettersPage = 100

// Audit renders GET /audit. A refused filter shows the form with the
// problems named (400).
func Audit(store AuditLister, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		q := c.QueryParams()
		v := views.AuditListView{
			Form: views.AuditFilterForm{Actor: q.Get("actor"), Action: q.Get("action"), DeadLetterID: q.Get("dead_letter_id"),
				Since: q.Get("since"), Until: q.Get("until")},
			Actions: actionOptions(),
		}
		meta := Meta(c, "Audit trail", "audit", version)
		f, err := ParseAuditFilter(q, now())
		v.Form.HideSignIns = f.HideSessions
		var verr *dlq.ValidationError
		if errors.As(err, &verr) {
			v.Invalid, v.Form.Problems = true, verr.Fields
			return Render(c, http.StatusBadRequest, views.Layout(meta, views.AuditList(v)))
		}
		if err != nil {
			return err
		}
		page, err := store.ListAudit(ctx, f)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			v.Rows = append(v.Rows, auditRow(e))
		}
		first := f
		first.Before = 0
		v.Narrowed, v.FirstPage = f.Narrowed(), f.Before == 0
		v.NewestURL = "/audit" + auditQuery(first)
		if page.Next != 0 {
			next := f
			next.Before = page.Next
			v.NextURL = "/audit" + auditQuery(next)
		}
		all := first
		all.Limit = 0
		v.ExportCSV = "/audit/export.csv" + auditQuery(all)
		v.ExportJSON = "/audit/export.json" + auditQuery(all)
		return Render(c, http.StatusOK, views.Layout(meta, views.AuditList(v)))
	}
}

func auditQuery(f dlq.AuditFilter) string {
	if s := f.Values().Encode(); s != "" {
		return "?" + s
	}
	return ""
}

func actionOptions() []views.Option {
	opts := []views.Option{{Value: "", Label: "any action"}}
	for _, a := range dlq.AuditActions {
		opts = append(opts, views.Option{Value: a, Label: actionText(a)})
	}
	return opts
}

// AuditEntryPage renders GET /audit/:id: the entry and the letters it
// touched, a page at a time (?after=<letter id>).
func AuditEntryPage(store AuditReader, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		id, err := pathID(c, "An audit entry", "/audit/12")
		if err != nil {
			return err
		}
		after, _ := strconv.ParseInt(c.QueryParam("after"), 10, 64)
		e, err := store.GetAuditEntry(ctx, id)
		if errors.Is(err, dlq.ErrNotFound) {
			return NotFound("There is no audit entry %d.", id)
		}
		if err != nil {
			return err
		}
		v := views.AuditEntryView{Row: auditRow(e), PrevHash: e.PrevHash, Hash: e.Hash, Details: prettyDetails(e.Details)}
		if start := parseDetails(e.Details).StartedAuditEventID; start != 0 {
			v.StartHref, v.StartID = fmt.Sprintf("/audit/%d", start), start
		} else {
			letters, total, err := store.AuditLetters(ctx, id, max(after, 0), auditLettersPage)
			if err != nil {
				return err
			}
			v.LettersTotal = views.Number(total)
			ids := make([]int64, 0, len(letters))
			for _, l := range letters {
				ids = append(ids, l.DeadLetterID)
			}
			outcomes, err := store.ReplayOutcomes(ctx, ids)
			if err != nil {
				return err
			}
			for _, l := range letters {
				row := views.AuditLetterRow{ID: l.DeadLetterID, Href: fmt.Sprintf("/dead-letters/%d", l.DeadLetterID),
					Outcome: outcomeWord(l.Outcome), Task: l.Task, Status: string(l.Status)}
				if o, ok := outcomes[l.DeadLetterID]; ok && l.Status == dlq.StatusReplayed {
					row.Status, row.StatusText, row.StatusHref = replayStatus(o)
				}
				v.Letters = append(v.Letters, row)
			}
			if len(letters) == auditLettersPage {
				v.NextLettersURL = fmt.Sprintf("/audit/%d?after=%d", id, letters[len(letters)-1].DeadLetterID)
			}
		}
		meta := Meta(c, fmt.Sprintf("Audit entry %d", id), "audit", version)
		return Render(c, http.StatusOK, views.Layout(meta, views.AuditEntryPage(v)))
	}
}

// replayStatus says what became of a letter's replay, for "status now": a
// replayed letter is not a success until its replay job succeeded, and
// one that died again names the letter it became. It returns the badge's
// class, its words and (for a death) the new letter's page.
func replayStatus(o dlq.ReplayOutcome) (class, text, href string) {
	if o.DiedAgainAs != nil {
		return "dead", fmt.Sprintf("died again as letter %d", *o.DiedAgainAs), fmt.Sprintf("/dead-letters/%d", *o.DiedAgainAs)
	}
	if o.Source != "" {
		return sourceReplayStatus(o)
	}
	switch o.JobState {
	case dlq.StateSucceeded:
		return "succeeded", "replay succeeded", ""
	case dlq.StateRunning:
		return "running", "replay running", ""
	case dlq.StateRetrying:
		return "retrying", "replay failed, retrying", ""
	case dlq.StateAvailable:
		return "available", "replay waiting", ""
	case dlq.StateDead:
		return "dead", "replay died again", ""
	}
	return "stale", "replayed; outcome unknown (its job is gone)", ""
}

// sourceReplayStatus is replayStatus for a replay in the system the letter
// came from (River), followed there.
func sourceReplayStatus(o dlq.ReplayOutcome) (class, text, href string) {
	job := "its job"
	if o.JobID != 0 {
		job = fmt.Sprintf("its job %d", o.JobID)
	}
	switch o.JobState {
	case dlq.StateSucceeded:
		return "succeeded", fmt.Sprintf("replay succeeded in %s", o.Source), ""
	case dlq.StateRunning:
		return "running", fmt.Sprintf("%s is running again in %s", job, o.Source), ""
	case dlq.StateAvailable:
		return "available", fmt.Sprintf("%s waits to run again in %s", job, o.Source), ""
	case dlq.StateDead:
		return "dead", fmt.Sprintf("replay died again in %s", o.Source), ""
	}
	return "stale", fmt.Sprintf("replayed in %s; outcome unknown (%s is gone there)", o.Source, job), ""
}

// outcomeWord says what an entry did to a letter: the links store the
// operation's kind, single entries their action.
func outcomeWord(outcome string) string {
	switch outcome {
	case dlq.ActionReplay:
		return "replayed"
	case dlq.ActionEditReplay:
		return "replayed with edited arguments"
	case dlq.ActionDiscard:
		return "discarded"
	case dlq.ActionRestore:
		return "restored"
	default:
		return outcome
	}
}

func prettyDetails(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// AuditEntryJSON is one audit entry as the API and the JSON export show it.
type AuditEntryJSON struct {
	ID           int64            `json:"id"`
	At           time.Time        `json:"at"`
	Actor        string           `json:"actor"`
	Action       string           `json:"action"`
	DeadLetterID *int64           `json:"dead_letter_id"`
	OperationID  *int64           `json:"operation_id"`
	Filter       *json.RawMessage `json:"filter"`
	MaxID        *int64           `json:"max_id"`
	Counts       json.RawMessage  `json:"counts"`
	Reason       string           `json:"reason"`
	RequestID    string           `json:"request_id"`
	RemoteAddr   string           `json:"remote_addr"`
	UserAgent    string           `json:"user_agent"`
	Details      json.RawMessage  `json:"details"`
	PrevHash     string           `json:"prev_hash"`
	Hash         string           `json:"hash"`
}

func apiAuditEntry(e dlq.AuditEntry) AuditEntryJSON {
	return AuditEntryJSON{ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, DeadLetterID: e.DeadLetterID,
		OperationID: e.OperationID, Filter: e.Filter, MaxID: e.MaxID, Counts: e.Counts, Reason: e.Reason,
		RequestID: e.RequestID, RemoteAddr: e.RemoteAddr, UserAgent: e.UserAgent, Details: e.Details,
		PrevHash: e.PrevHash, Hash: e.Hash}
}

// APIAudit answers GET /api/v1/audit?actor=&action=&dead_letter_id=&since=
// &until=&hide_sign_ins=&limit=&cursor= with a page of entries, newest
// first, and the cursor of the next page (null on the last).
func APIAudit(store AuditLister, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		f, err := ParseAuditFilter(c.QueryParams(), now())
		if err != nil {
			return err
		}
		page, err := store.ListAudit(ctx, f)
		if err != nil {
			return err
		}
		out := struct {
			Items      []AuditEntryJSON `json:"items"`
			NextCursor *string          `json:"next_cursor"`
		}{Items: make([]AuditEntryJSON, 0, len(page.Entries))}
		for _, e := range page.Entries {
			out.Items = append(out.Items, apiAuditEntry(e))
		}
		if page.Next != 0 {
			s := strconv.FormatInt(page.Next, 10)
			out.NextCursor = &s
		}
		return c.JSON(http.StatusOK, out)
	}
}
