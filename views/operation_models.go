package views

import "time"

// OperationView is the page that follows a bulk operation live.
type OperationView struct {
	ID        int64
	Kind      string // "replay" or "discard"
	Verb      string // "Replay" or "Discard"
	State     string // dlq's state name: "running", "settling", "canary_failed", "auto_paused", "done", ...
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
	// Replays is the second phase of a replay: its jobs settling. Nil for
	// a discard.
	Replays *ReplaysView
	// Why explains a state that waits for a decision (the guard paused it,
	// the canary died) or an end before every replay settled.
	Why string

	Selection     string
	SelectionHref string // "" for explicit ids
	MaxID         int64
	Pace          string // "" when not paced
	// Target is where, from when and with how many attempts a replay's
	// jobs run, in words ("in queue sandbox, from …"); "" as each letter ran.
	Target string

	Canary *CanaryView

	CanAct     bool
	CanCancel  bool
	CanRelease bool
	// ReleaseLabel is the release button's words ("Release anyway" after
	// a dead canary).
	ReleaseLabel     string
	CanResume        bool
	CanStopFollowing bool
	CSRFToken        string
	// LettersHref opens the audit entry that lists every letter acted on.
	LettersHref string
	Error       string
	// Problem is a refused cancel or release (409), shown above the rest.
	Problem *Notice
}

// ReplaysView is where an operation's replay jobs are: Settled
// (succeeded or died again) out of Enqueued (the letters handed to the
// queue), with the counts per state.
type ReplaysView struct {
	Enqueued, Settled                      int64
	EnqueuedText, SettledText, Percent     string
	Waiting, Running, Succeeded, DiedAgain string
	// DiedAgainN is DiedAgain as a number, to colour it.
	DiedAgainN int64
	// Guard says what the died-again guard watches ("" when none).
	Guard string
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
	JobHref    string // "" for a job of another system
	// Source is the system the job runs in when not Redrive (River).
	Source    string
	State     string // the job's state: available, running, retrying, succeeded, dead
	Attempt   int
	LastError string
}
