package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/views"
)

// DeadLetterGetter is what the detail page needs from the store.
type DeadLetterGetter interface {
	GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error)
}

// getLetter parses the id and loads the letter, turning both kinds of bad
// id into a friendly error.
func getLetter(ctx context.Context, store DeadLetterGetter, param string) (dlq.DeadLetterDetail, error) {
	id, err := strconv.ParseInt(param, 10, 64)
	if err != nil || id <= 0 {
		return dlq.DeadLetterDetail{}, BadRequest("invalid_id", "A dead letter id is a positive whole number, like /dead-letters/1234.")
	}
	d, err := store.GetDeadLetter(ctx, id)
	if errors.Is(err, dlq.ErrNotFound) {
		return dlq.DeadLetterDetail{}, NotFound("There is no dead letter %d. It may have been purged by retention, or the id is mistyped.", id)
	}
	return d, err
}

func detailView(d dlq.DeadLetterDetail, logsTemplate string) views.DeadLetterDetailView {
	v := views.DeadLetterDetailView{
		ID:            d.ID,
		JobID:         d.JobID,
		Task:          d.Task,
		Queue:         d.Queue,
		Status:        string(d.Status),
		Reason:        reasonLabel(d.Reason),
		Why:           why(d.DeadLetter),
		AttemptCount:  fmt.Sprintf("%d of %d", d.Attempts, d.MaxAttempts),
		EnqueuedAt:    d.EnqueuedAt,
		FailedAt:      d.FailedAt,
		WorkerVersion: d.WorkerVersion,
		Fingerprint:   d.Fingerprint,
		GroupHref:     "/groups?" + url.Values{"task": {d.Task}}.Encode(),
		ListHref:      GroupHref(d.Fingerprint),
		ErrorClass:    d.ErrorClass,
		ErrorMessage:  d.ErrorMessage,
		ReplayedAt:    d.ReplayedAt,
		DiscardedAt:   d.DiscardedAt,
		LaterLetters:  d.LaterLetters,
	}
	if d.IdempotencyKey != nil {
		v.IdempotencyKey = *d.IdempotencyKey
	}
	v.Source, v.ExternalID, v.SourceNote, v.SourceExtra = sourceFacts(d)
	v.Args, v.ArgsNote = prettyJSON(d.Args)
	v.Kwargs, v.KwargsNote = prettyJSON(d.Kwargs)
	v.ArgsMasked = strings.Contains(v.Args, mask.Placeholder) || strings.Contains(v.Kwargs, mask.Placeholder)
	if d.ReplayOf != nil {
		v.ReplayOf = *d.ReplayOf
	}
	if d.ReplayJobID != nil {
		v.ReplayJobID = *d.ReplayJobID
	}
	if d.ReplayedBy != nil {
		v.ReplayedBy = *d.ReplayedBy
	}
	if d.DiscardedBy != nil {
		v.DiscardedBy = *d.DiscardedBy
	}
	if d.DiscardReason != nil {
		v.DiscardNote = *d.DiscardReason
	}

	head, rest, lines := splitTraceback(d.Traceback)
	v.Traceback = views.TracebackView{Head: head, Rest: rest, Full: d.Traceback, Lines: lines}
	if d.TracebackTruncated() {
		v.Traceback.Note = fmt.Sprintf("This traceback is %s characters long; only the first %s are shown. The lines counted are those shown.",
			views.Number(int64(d.TracebackLen)), views.Number(int64(dlq.TracebackCap)))
	}

	for i, a := range d.History {
		av := views.AttemptView{
			N: a.Attempt, At: a.At, Host: a.Host, Worker: a.Worker, Version: a.Version,
			ErrorClass: a.Class, Message: a.Message, Outcome: string(a.Outcome), OutcomeText: outcomeText(a.Outcome),
			Traceback: a.Traceback, Logs: attemptLogs(a.Logs), LogsURL: logsURL(logsTemplate, d.JobID, d.Task, a),
		}
		if a.DurationMS > 0 {
			av.Duration = humanDuration(msDuration(a.DurationMS))
		}
		if a.RetryInMS > 0 && a.Outcome == dlq.OutcomeRetry {
			av.RetryAfter = "retried after " + humanDuration(msDuration(a.RetryInMS))
		}
		if av.N == 0 {
			av.N = i + 1
		}
		v.History = append(v.History, av)
	}
	return v
}

// sourceFacts says where a letter another system sent came from: its
// source, its id there, what that id is when Redrive knows (a River job at
// an attempt), and what else the source said of it (a River job's
// priority and tags, and its kind where the task had to be renamed). All
// empty for Redrive's own.
func sourceFacts(d dlq.DeadLetterDetail) (source, externalID, note, extra string) {
	if d.ExternalID == nil {
		return "", "", "", ""
	}
	if d.SourceKind == dlq.SourceKindRiver {
		if job, attempt, err := dlq.ParseRiverExternalID(*d.ExternalID); err == nil {
			note = fmt.Sprintf("River job %d in queue %s, discarded at attempt %d", job, d.Queue, attempt)
		}
		var details struct {
			Kind     string   `json:"kind"`
			Priority int      `json:"priority"`
			Tags     []string `json:"tags"`
		}
		if json.Unmarshal(d.SourceDetails, &details) == nil && details.Priority > 0 {
			parts := []string{"priority " + strconv.Itoa(details.Priority)}
			if len(details.Tags) > 0 {
				parts = append(parts, "tags "+strings.Join(details.Tags, ", "))
			}
			if details.Kind != "" && details.Kind != d.Task {
				parts = append(parts, "kind "+details.Kind)
			}
			extra = strings.Join(parts, " · ")
		}
	}
	return d.Source, *d.ExternalID, note, extra
}
