package views

import "time"

// OperationView is the page that follows a bulk operation live.
type OperationView struct {
	ID        int64
	Kind      string // "replay" or "discard"
	Verb      string // "Replay" or "Discard"
	State     string // "running", "canary", "done", "cancelled", "failed"
	StateText string // the state in words
	StateKind string // how to colour it: "running", "ok", "warn", "error"
	// Live: the operation can still change, so the fragment polls PollURL.
	Live    bool
	PollURL string

	Actor      string
	Reason     string
	CreatedAt  time.Time
	FinishedAt *time.Time

	// Progress: Handled (acted on or skipped) out of Matched.
	Matched     int64
	Handled     int64
	MatchedText string
	HandledText string
	Percent     string
	Outcomes    []OutcomeItem

	Selection     string
	SelectionHref string // "" for explicit ids
	MaxID         int64
	Pace          string // "" when not paced

	Canary *CanaryView

	CanAct     bool
	CanCancel  bool
	CanRelease bool
	CSRFToken  string
	// LettersHref opens the audit entry that lists every letter acted on.
	LettersHref string
	Error       string
	// Problem is a refused cancel or release (409), shown above the rest.
	Problem *Notice
}

// OutcomeItem is one outcome of an operation: "replayed 1,234".
type OutcomeItem struct {
	Key   string // stable name for tests: "replayed", "already_replayed", ...
	Label string
	N     string
	Kind  string // "ok", "warn", "muted"
}

// CanaryView is the canary of a paced or careful replay: the first few
// letters replayed alone, their jobs' outcomes, and what to do next.
type CanaryView struct {
	Size int
	// Verdict: "starting", "waiting", "succeeded", "died", "released".
	Verdict string
	Message string
	Jobs    []CanaryJobRow
}

// CanaryJobRow is one canary letter and the job its replay made.
type CanaryJobRow struct {
	LetterID   int64
	LetterHref string
	JobID      int64
	JobHref    string
	State      string // the job's state: available, running, retrying, succeeded, dead
	Attempt    int
	LastError  string
}
