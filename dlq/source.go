package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A source is where letters come from and where their replays go.
// Redrive's own queue is the source RedriveSource; every other source is
// named by the operator (REDRIVE_SOURCES), never by what a letter says.

// RedriveSource is Redrive's own queue: its worker's letters, replayed by
// enqueueing a job.
const RedriveSource = "redrive"

// SourceKind is what a source is, which decides what the console can do
// with its letters.
type SourceKind string

// The kinds of source.
const (
	// SourceKindRedrive is Redrive's own queue.
	SourceKindRedrive SourceKind = "redrive"
	// SourceKindHTTP is any system that sends its letters over HTTP
	// (POST /api/v1/letters).
	SourceKindHTTP SourceKind = "http"
	// SourceKindRiver is a River queue (github.com/riverqueue/river):
	// Redrive imports the jobs it discarded.
	SourceKindRiver SourceKind = "river"
	// SourceKindCelery is a Celery app (integrations/celery): its workers
	// send its letters over HTTP, and take their replays from Redrive to
	// publish them through the app's broker.
	SourceKindCelery SourceKind = "celery"
)

// Valid reports whether k is a kind an operator may configure.
func (k SourceKind) Valid() bool {
	return k == SourceKindHTTP || k == SourceKindRiver || k == SourceKindCelery
}

// SendsOverHTTP reports whether a source of kind k POSTs its letters to
// /api/v1/letters itself.
func (k SourceKind) SendsOverHTTP() bool { return k == SourceKindHTTP || k == SourceKindCelery }

// TakesItsReplays reports whether a source of kind k takes its replays
// from Redrive itself (POST /api/v1/sources/{name}/replays/take) rather
// than being sent them.
func (k SourceKind) TakesItsReplays() bool { return k == SourceKindCelery }

// Source is one configured source and its state.
type Source struct {
	Name string     `db:"name" json:"name"`
	Kind SourceKind `db:"kind" json:"kind"`
	// Imported counts the letters it has brought in; LastImportAt is when
	// the last came.
	Imported     int64      `db:"imported" json:"imported"`
	LastImportAt *time.Time `db:"last_import_at" json:"last_import_at"`
	CreatedAt    time.Time  `db:"created_at" json:"created_at"`
	// Letters and Pending count its letters kept now, and those pending.
	Letters int64 `db:"letters" json:"letters"`
	Pending int64 `db:"pending" json:"pending"`
	// CheckedAt is when an importing source (River) last read its queue to
	// the end; LastError, at LastErrorAt, is what stopped its last import,
	// cleared by the next one that succeeds.
	CheckedAt   *time.Time `db:"checked_at" json:"checked_at,omitempty"`
	LastError   *string    `db:"last_error" json:"last_error,omitempty"`
	LastErrorAt *time.Time `db:"last_error_at" json:"last_error_at,omitempty"`
	// ReplayURL is an HTTP source's replay endpoint, where its letters'
	// replays are posted, signed (nil: they cannot be replayed from here).
	ReplayURL *string `db:"replay_url" json:"-"` // may carry a token: never shown whole
	// ReplaysWaiting counts the replays queued to be sent to it (the
	// sources page's Sources only); ReplayProblem is why the latest of
	// them that failed to go did not (the endpoint down, River
	// unreachable).
	ReplaysWaiting int64   `db:"replays_waiting" json:"replays_waiting"`
	ReplayProblem  *string `db:"replay_problem" json:"replay_problem,omitempty"`
}

// CanReplay says whether a letter of this source can be replayed from the
// console, and why not when it cannot.
func (s Source) CanReplay() (bool, string) {
	if s.Kind == SourceKindRedrive || s.Kind == SourceKindRiver || s.Kind == SourceKindCelery || s.Name == "" || s.ReplayURL != nil {
		return true, ""
	}
	return false, fmt.Sprintf("a letter of %s arrived over HTTP, and the source names no replay endpoint (REDRIVE_SOURCES=%s=http:URL)", s.Name, s.Name)
}

// Retrier runs a letter's job again in the source it came from (River's
// JobRetry): the same job, under its id there, which it returns. A job the
// source will not run again (no longer there, already retried, held back
// by a unique job) is an error of code EConflict saying why.
type Retrier interface {
	Retry(ctx context.Context, externalID string) (jobID int64, err error)
}

// Deleter deletes a letter's job in the source it came from (River's
// JobDelete), when a discard asks to. A job the source no longer has is
// already deleted; one it will not delete (running again) is an error of
// code EConflict saying why.
type Deleter interface {
	Delete(ctx context.Context, externalID string) error
}

// SourceReplay is the replay of one letter in the source it came from,
// queued by a bulk operation and sent in the background (source_replays):
// the letter's identity there, and once sent the job it runs as.
type SourceReplay struct {
	ID           int64  `db:"id"`
	DeadLetterID int64  `db:"dead_letter_id"`
	OperationID  *int64 `db:"operation_id"`
	Source       string `db:"source"`
	ExternalID   string `db:"external_id"`
	// JobID is the job in the source, once sent (0 before).
	JobID int64 `db:"job_id"`
	// Tries counts the sends tried before this one. Resumed says an
	// earlier send was cut short (the console stopped mid-send), so the
	// source may already have it.
	Tries   int  `db:"tries"`
	Resumed bool `db:"resumed"`
}

// SourceReplayState is where a sent replay is in its source.
type SourceReplayState string

// The states of a replay in another system (migrations/00111_source_replays.sql).
const (
	SourceReplayWaiting   SourceReplayState = "waiting"
	SourceReplaySending   SourceReplayState = "sending"
	SourceReplaySent      SourceReplayState = "sent"
	SourceReplayRunning   SourceReplayState = "running"
	SourceReplaySucceeded SourceReplayState = "succeeded"
	SourceReplayDiedAgain SourceReplayState = "died_again"
	SourceReplayGone      SourceReplayState = "gone"
	SourceReplayRefused   SourceReplayState = "refused"
)

// Settled reports whether the replay has ended, one way or another.
func (s SourceReplayState) Settled() bool {
	switch s {
	case SourceReplaySucceeded, SourceReplayDiedAgain, SourceReplayGone, SourceReplayRefused:
		return true
	}
	return false
}

// ReplaySender sends a queued replay to its source: River retries the job
// (JobRetry), an HTTP source's endpoint is posted the letter. A replay the
// source will never take (the job retried since, a unique job holding its
// key, the endpoint's 409) is an error of code EConflict saying why; any
// other error is tried again later.
type ReplaySender interface {
	SendReplay(ctx context.Context, r SourceReplay) (SentReplay, error)
}

// SentReplay is what a source said when it took a replay: the job the
// replay runs as there (0 when it names none), and its answer, kept
// (an HTTP endpoint's status and body).
type SentReplay struct {
	JobID  int64
	Answer string
}

// ReplayFollower reads where sent replays are in their source: the state
// of each one it can tell (by SourceReplay.ID); one it leaves out is
// unchanged.
type ReplayFollower interface {
	FollowReplays(ctx context.Context, rs []SourceReplay) (map[int64]SourceReplayState, error)
}

// TakenReplay is a replay a source's own workers took from Redrive to run
// (POST /api/v1/sources/{name}/replays/take, a Celery app's): what to
// publish, with the arguments edited when the operator edited them, leased
// to the taker. Resumed says another taker held it before and stopped
// without saying it was sent: it may have been published already.
type TakenReplay struct {
	ReplayID     int64           `db:"replay_id" json:"replay_id"`
	DeadLetterID int64           `db:"dead_letter_id" json:"dead_letter_id"`
	OperationID  *int64          `db:"operation_id" json:"operation_id"`
	ExternalID   string          `db:"external_id" json:"external_id"`
	Task         string          `db:"task" json:"task"`
	Queue        string          `db:"queue" json:"queue"`
	Args         json.RawMessage `db:"args" json:"args"`
	Kwargs       json.RawMessage `db:"kwargs" json:"kwargs"`
	Resumed      bool            `db:"resumed" json:"resumed"`
}

// Bounds of a take of replays.
const (
	MaxTakeReplays   = 100
	DefaultTakeLease = time.Minute
	MaxTakeLease     = 10 * time.Minute
)

// OutcomeReport is another system's word on how a replay it was sent went
// (POST /api/v1/letters/{id}/outcome): the letter replayed, and its
// replay's state there: sent (published, by a source that takes its
// replays), running, succeeded or died_again, with a message (what killed
// it). Sources, when not empty, are those the reporter may speak for (a
// token limited to them).
type OutcomeReport struct {
	LetterID int64
	State    SourceReplayState
	Message  string
	// JobRef is the source's own id of the job the replay runs as, with
	// state sent (a Celery task id).
	JobRef  string
	Sources []string
}

// OutcomeResult is a replay as its reported outcome left it; Repeated
// says the report changed nothing (the outcome was known).
type OutcomeResult struct {
	LetterID int64             `json:"dead_letter_id"`
	ReplayID int64             `json:"replay_id"`
	Source   string            `json:"source"`
	State    SourceReplayState `json:"state"`
	JobRef   string            `json:"job_ref,omitempty"`
	Repeated bool              `json:"repeated"`
}

// ErrImportCursorMoved is returned when an importer's cursor is no longer
// the one its batch was read from: another console imported the same
// letters meanwhile. Nothing was written; read the cursor again.
var ErrImportCursorMoved = errors.New("the import cursor moved: another console is importing this source")

// A River job discarded at attempt N is the letter "ID/N": its identity in
// its source. River's JobRetry keeps a job's id and its attempt count, so
// the same job discarded again after a retry is a new failure, and a new
// letter, while the same discard imported twice is one.

// RiverExternalID is the identity, in its source, of the letter a River
// job discarded at its attempt-th attempt becomes.
func RiverExternalID(jobID int64, attempt int) string {
	return strconv.FormatInt(jobID, 10) + "/" + strconv.Itoa(attempt)
}

// ParseRiverExternalID reads the River job and attempt a letter's external
// id names (RiverExternalID).
func ParseRiverExternalID(externalID string) (jobID int64, attempt int, err error) {
	rawID, rawAttempt, ok := strings.Cut(externalID, "/")
	jobID, idErr := strconv.ParseInt(rawID, 10, 64)
	attempt, attemptErr := strconv.Atoi(rawAttempt)
	if !ok || idErr != nil || attemptErr != nil || jobID < 1 || attempt < 0 {
		return 0, 0, fmt.Errorf("%q does not name a River job and attempt", externalID)
	}
	return jobID, attempt, nil
}

// MaxSourceNameLen is the longest source name.
const MaxSourceNameLen = 100

// SourceNameProblem says what is wrong with a source's name, "" when
// nothing: the rule of queue names.
func SourceNameProblem(name string) string { return nameProblem(name, MaxSourceNameLen) }

// Limits on a letter another system sends.
const (
	// MaxIngestBatch is the most letters one request may carry.
	MaxIngestBatch = 1_000
	// MaxExternalIDLen bounds a letter's id in its source.
	MaxExternalIDLen = 200
	// MaxIngestMessage bounds an error message; MaxIngestTraceback the
	// final traceback; MaxIngestHistory the attempts kept.
	MaxIngestMessage   = 64 << 10
	MaxIngestTraceback = 1 << 20
	MaxIngestHistory   = MaxMaxAttempts
)

// IngestLetter is a letter another system sends (POST /api/v1/letters):
// a task of its own that failed for good, with everything needed to
// diagnose it. ExternalID is its identity in the source, which makes the
// same failure sent twice one letter.
type IngestLetter struct {
	ExternalID  string          `json:"external_id"`
	Task        string          `json:"task"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Kwargs      json.RawMessage `json:"kwargs"`
	ErrorClass  string          `json:"error_class"`
	Message     string          `json:"error"`
	Traceback   string          `json:"traceback"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	History     Attempts        `json:"history"`
	Reason      Reason          `json:"reason"`
	EnqueuedAt  time.Time       `json:"enqueued_at,omitzero"`
	FailedAt    time.Time       `json:"failed_at"`
	// Details is what the source knows of the letter that its columns do
	// not hold (River's metadata, tags and priority), a JSON object kept
	// beside its identity; set by an importer, never read from a request.
	Details json.RawMessage `json:"-"`
	// ReplayOf is the letter this failure is a replay of: an earlier
	// failure of the same job, retried (set by an importer), or a replay
	// its source ran and saw die again (sent with the letter, and a letter
	// of the same source).
	ReplayOf int64 `json:"replay_of,omitempty"`
}

// Normalise fills the defaults of what the sender left out (queue
// "default", args [], kwargs {}, attempts 1, max attempts its attempts,
// reason exhausted when the attempts ran out and permanent otherwise,
// enqueued when it failed) and returns the problems of what it sent, as a
// *ValidationError keyed by field. now bounds failed_at: a letter cannot
// fail in the future.
func (l IngestLetter) Normalise(now time.Time) (IngestLetter, error) {
	l = l.withDefaults()
	problems := map[string]string{}
	l.identityProblems(problems)
	l.errorProblems(problems)
	l.attemptProblems(problems)
	switch {
	case l.FailedAt.IsZero():
		problems["failed_at"] = "is required: when the task failed for good, RFC 3339"
	case l.FailedAt.After(now.Add(time.Minute)):
		problems["failed_at"] = "must not be in the future"
	case l.FailedAt.Before(cursorMinTime):
		problems["failed_at"] = "must be after 1970"
	case l.EnqueuedAt.After(l.FailedAt):
		problems["enqueued_at"] = "must not be after failed_at"
	}
	if len(problems) > 0 {
		return l, &ValidationError{Fields: problems}
	}
	return l, nil
}

// withDefaults fills what the sender may leave out.
func (l IngestLetter) withDefaults() IngestLetter {
	if l.Queue == "" {
		l.Queue = DefaultQueue
	}
	l.Args, l.Kwargs = orJSON(l.Args, `[]`), orJSON(l.Kwargs, `{}`)
	if l.Attempts == 0 {
		l.Attempts = 1
	}
	if l.MaxAttempts == 0 {
		l.MaxAttempts = l.Attempts
	}
	if l.Reason == "" {
		l.Reason = ReasonPermanent
		if l.Attempts >= l.MaxAttempts {
			l.Reason = ReasonExhausted
		}
	}
	if l.EnqueuedAt.IsZero() {
		l.EnqueuedAt = l.FailedAt
	}
	l.History = l.historyWithDefaults()
	return l
}

// historyWithDefaults numbers the attempts the sender left unnumbered,
// dates the undated when the letter failed, and says what came of each
// that does not say: a retry, and for the last, the dead letter.
func (l IngestLetter) historyWithDefaults() Attempts {
	h := slices.Clone(l.History)
	for i := range h {
		if h[i].Attempt == 0 {
			h[i].Attempt = i + 1
		}
		if h[i].At.IsZero() {
			h[i].At = l.FailedAt
		}
		if h[i].Outcome == "" {
			h[i].Outcome = OutcomeRetry
			if i == len(h)-1 {
				h[i].Outcome = OutcomeDead
			}
		}
	}
	return h
}

// identityProblems adds what is wrong with the letter's id, names and
// arguments.
func (l IngestLetter) identityProblems(problems map[string]string) {
	switch {
	case l.ExternalID == "":
		problems["external_id"] = "is required: the letter's id in its source, so that sending it twice makes one letter"
	case len(l.ExternalID) > MaxExternalIDLen || !printable(l.ExternalID):
		problems["external_id"] = fmt.Sprintf("must be at most %d printable characters", MaxExternalIDLen)
	}
	EnqueueParams{Task: l.Task, Queue: l.Queue, MaxAttempts: 1}.nameProblems(problems)
	EnqueueParams{Args: l.Args, Kwargs: l.Kwargs}.payloadProblems(problems)
}

// errorProblems adds what is wrong with the error the letter reports.
func (l IngestLetter) errorProblems(problems map[string]string) {
	switch {
	case l.ErrorClass == "":
		problems["error_class"] = "is required: the exception's class, which error groups are made of"
	case len(l.ErrorClass) > 200 || !printable(l.ErrorClass):
		problems["error_class"] = "must be at most 200 printable characters"
	}
	if len(l.Message) > MaxIngestMessage || !utf8.ValidString(l.Message) || strings.ContainsRune(l.Message, 0) {
		problems["error"] = fmt.Sprintf("must be UTF-8 text of at most %d KiB", MaxIngestMessage>>10)
	}
	if len(l.Traceback) > MaxIngestTraceback || !utf8.ValidString(l.Traceback) || strings.ContainsRune(l.Traceback, 0) {
		problems["traceback"] = fmt.Sprintf("must be UTF-8 text of at most %d MiB", MaxIngestTraceback>>20)
	}
}

// attemptProblems adds what is wrong with the attempts, the history and
// the reason.
func (l IngestLetter) attemptProblems(problems map[string]string) {
	if l.Attempts < 1 || l.Attempts > MaxMaxAttempts {
		problems["attempts"] = fmt.Sprintf("must be between 1 and %d", MaxMaxAttempts)
	}
	if l.MaxAttempts < l.Attempts || l.MaxAttempts > MaxMaxAttempts {
		problems["max_attempts"] = fmt.Sprintf("must be between attempts and %d", MaxMaxAttempts)
	}
	if len(l.History) > MaxIngestHistory {
		problems["history"] = fmt.Sprintf("must hold at most %d attempts", MaxIngestHistory)
	}
	for _, a := range l.History {
		text := a.Class + a.Message + a.Traceback + a.Worker + a.Host + a.Version + a.Logs
		if !utf8.ValidString(text) || strings.ContainsRune(text, 0) {
			problems["history"] = "each attempt's class, message, traceback, worker, host, version and logs must be UTF-8 text"
		}
		if len(a.Logs) > MaxAttemptLogBytes {
			problems["history"] = fmt.Sprintf("each attempt's logs must be at most %d KiB, as Redrive's own worker keeps", MaxAttemptLogBytes>>10)
		}
		if !slices.Contains(ingestOutcomes, a.Outcome) {
			problems["history"] = fmt.Sprintf("an attempt's outcome is one of %s", joinOutcomes(ingestOutcomes))
		}
	}
	if l.Reason != ReasonExhausted && l.Reason != ReasonPermanent {
		problems["reason"] = "must be exhausted (its attempts ran out) or permanent (it failed in a way no retry mends)"
	}
}

// ingestOutcomes are what an attempt of another system may have come to.
var ingestOutcomes = []Outcome{OutcomeRetry, OutcomeDead, OutcomeLeaseExpired, OutcomeInterrupted, OutcomeKilled, OutcomeCancelled}

// joinOutcomes lists outcomes for a message.
func joinOutcomes(os []Outcome) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = string(o)
	}
	return strings.Join(parts, ", ")
}

// IngestResult is what became of one letter sent: its letter, new or
// the one the same external id made before.
type IngestResult struct {
	ExternalID string `json:"external_id"`
	ID         int64  `json:"id"`
	Created    bool   `json:"created"`
}
