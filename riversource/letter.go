package riversource

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river/rivertype"

	"github.com/redrive/redrive/dlq"
)

// Classes of a River attempt's error. River keeps an error's text only, not
// its type; a panic is told apart by its stack trace.
const (
	classError     = "error"
	classPanic     = "panic"
	classDiscarded = "discarded"
)

// details is what River knows of a job that a letter's columns do not
// hold, kept beside its identity (dlq.IngestLetter.Details).
type details struct {
	Kind     string          `json:"kind"`
	JobID    int64           `json:"job_id"`
	Priority int             `json:"priority"`
	Tags     []string        `json:"tags,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// taskPattern is what dlq accepts as a task's name; a River kind outside it
// is imported under a name that fits, its own kept in the details.
var taskPattern = regexp.MustCompile(`[^A-Za-z0-9._:-]+`)

// letterOf turns a job River discarded into the letter Redrive keeps: the
// kind as the task, River's args object as the keyword arguments, every
// attempt's error as the history, the last as the letter's error. What
// does not fit a letter's limits is cut, never refused: the job itself stays
// in River, where a replay runs it, so the letter is for reading. now
// bounds the times, which come from River's hosts' clocks.
func letterOf(job *rivertype.JobRow, now time.Time) (dlq.IngestLetter, error) {
	failedAt := job.CreatedAt
	if job.FinalizedAt != nil {
		failedAt = *job.FinalizedAt
	}
	failedAt = earlier(failedAt, now)
	l := dlq.IngestLetter{
		ExternalID:  dlq.RiverExternalID(job.ID, job.Attempt),
		Task:        taskName(job.Kind),
		Queue:       job.Queue,
		Args:        json.RawMessage(`[]`),
		Kwargs:      argsObject(job.EncodedArgs),
		Attempts:    max(job.Attempt, 1),
		MaxAttempts: max(job.MaxAttempts, job.Attempt, 1),
		EnqueuedAt:  earlier(job.CreatedAt, failedAt),
		FailedAt:    failedAt,
		ErrorClass:  classDiscarded,
		Message:     "River discarded the job without recording an error",
	}
	errs := job.Errors
	if len(errs) > dlq.MaxIngestHistory {
		errs = errs[len(errs)-dlq.MaxIngestHistory:]
	}
	for i, e := range errs {
		a := dlq.Attempt{Attempt: e.Attempt, At: earlier(e.At, failedAt), Class: classError,
			Message: text(e.Error, dlq.MaxIngestMessage), Traceback: text(e.Trace, dlq.MaxIngestTraceback), Outcome: dlq.OutcomeRetry}
		if e.Trace != "" {
			a.Class = classPanic
		}
		if i == len(errs)-1 {
			a.Outcome = dlq.OutcomeDead
			l.ErrorClass, l.Message, l.Traceback = a.Class, a.Message, a.Traceback
		}
		l.History = append(l.History, a)
	}
	d, err := json.Marshal(details{Kind: job.Kind, JobID: job.ID, Priority: job.Priority, Tags: job.Tags, Metadata: metadata(job.Metadata)})
	if err != nil {
		return dlq.IngestLetter{}, fmt.Errorf("river job %d: details: %w", job.ID, err)
	}
	l.Details = d
	l, err = l.Normalise(now)
	if err != nil {
		return dlq.IngestLetter{}, fmt.Errorf("river job %d does not make a letter: %w", job.ID, err)
	}
	return l, nil
}

// taskName is kind as a task's name: itself when it fits, otherwise with
// what does not fit replaced.
func taskName(kind string) string {
	if dlq.TaskNameProblem(kind) == "" {
		return kind
	}
	name := strings.Trim(taskPattern.ReplaceAllString(kind, "_"), "_")
	if name == "" {
		name = "river_job"
	}
	for dlq.TaskNameProblem(name) != "" && len(name) > 1 {
		name = name[:len(name)-1]
	}
	return name
}

// argsObject is River's encoded args as keyword arguments: River's args are
// a JSON object; anything else, or too large to keep, is kept as a note
// saying so (the job keeps its args in River).
func argsObject(args []byte) json.RawMessage {
	const limit = 1<<20 - 1024
	if len(args) > 0 && len(args) <= limit && json.Valid(args) && strings.HasPrefix(strings.TrimSpace(string(args)), "{") {
		return json.RawMessage(args)
	}
	note, _ := json.Marshal(map[string]string{"_redrive": fmt.Sprintf("River's args (%d bytes) are not a JSON object under 1 MiB; the job in River keeps them", len(args))})
	return note
}

// metadata is River's metadata when it is a JSON object, else nothing.
func metadata(m []byte) json.RawMessage {
	if len(m) == 0 || !json.Valid(m) || string(m) == "{}" {
		return nil
	}
	return json.RawMessage(m)
}

// text is s as a letter keeps text: valid UTF-8 without NUL, at most limit
// bytes, a cut one ending in an ellipsis.
func text(s string, limit int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= limit {
		return s
	}
	cut := limit - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
