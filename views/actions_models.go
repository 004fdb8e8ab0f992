package views

import "time"

// View models of the actions on dead letters: the action panel of a
// letter's page, notices after an action, audit rows.

// Notice is a message about an action with an optional link: "Replayed as
// job 12", "This letter was already replayed as job 9".
type Notice struct {
	Kind     string // "ok", "warn" or "error"
	Message  string
	LinkText string // "" for no link
	Href     string
	After    string // words after the link: "."
}

// LetterActionsView is the action panel of a letter's page: what may be
// done to the letter now, each action its own form with its own one-time
// key, made when the page was rendered.
type LetterActionsView struct {
	ID        int64
	Status    string // "pending", "replayed", "discarded"
	CSRFToken string
	// CanAct: the requester may act; otherwise NoActNote says who may.
	CanAct    bool
	NoActNote string
	// VersionWarning: the letter failed on a build live workers still run.
	VersionWarning string
	// ReplayRefused says why the letter cannot be replayed from here (a
	// letter another system sent); empty when it can.
	ReplayRefused string
	// Result reports the action just done (after the redirect); Problem an
	// action refused (409: already replayed, discarded).
	Result  *Notice
	Problem *Notice

	ReplayJobID int64
	// ReplaySource is the source the letter came from when it is another
	// system's: its replay runs there, under ReplayJobID, not in Redrive.
	ReplaySource string
	// ReplayByEndpoint: ReplaySource is an HTTP source, whose replays are
	// posted to its replay endpoint.
	ReplayByEndpoint bool
	// ReplayByWorkers: ReplaySource's workers take its replays and publish
	// them (Celery): the arguments can be edited.
	ReplayByWorkers bool
	// DeletableIn is the source whose job a discard may delete too (a River
	// source); empty when there is none.
	DeletableIn string

	ReplayKey, EditKey, DiscardKey, RestoreKey string
	ReplayReason                               string

	// The replay elsewhere or later (dlq.ReplayTarget): its form's key,
	// whether it starts open (after a refusal), and its fields as typed.
	// Queue and MaxAttempts are the letter's own, shown as the defaults.
	TargetKey                                                   string
	TargetOpen                                                  bool
	TargetQueue, TargetStartAt, TargetMaxAttempts, TargetReason string
	Queue                                                       string
	MaxAttempts                                                 int

	// Editable is false when the payload is too large to edit here.
	Editable   bool
	EditOpen   bool // the editor starts open (after a refused edit)
	EditArgs   string
	EditKwargs string
	EditReason string

	DiscardOpen   bool
	DiscardReason string
	RestoreReason string

	// Problems maps a field ("args", "kwargs", "reason") to what is wrong.
	Problems map[string]string
}

// AuditRow is one audit entry as the audit page and a letter's page show it.
type AuditRow struct {
	ID         int64
	Href       string
	At         time.Time
	Actor      string
	Action     string // the stored action, e.g. "edit_replay"
	ActionText string // in words: "Edited and replayed"
	Counts     []CountItem
	Reason     string
	RequestID  string
	RemoteAddr string
	UserAgent  string

	LetterID   int64 // 0 when the entry is not about one letter
	LetterHref string
	JobID      int64 // the job a replay made; 0 otherwise
	JobHref    string

	OperationID   int64
	OperationHref string
	// Filter and MaxID bound a bulk entry's selection: the filter in words
	// and the highest letter id it could touch.
	Filter     string
	FilterHref string
	IDs        string // "ids 1, 2, 3" for a bulk entry over explicit ids
	MaxID      int64

	// Diffs show an edit: one per changed field.
	Diffs []FieldDiff
}

// CountItem is one outcome and its count: "replayed 3".
type CountItem struct {
	Label string
	N     string
}

// FieldDiff is the line diff of one edited field (args or kwargs).
type FieldDiff struct {
	Field string
	Lines []DiffLine
	// Cut says the diff was too long and only its start is shown.
	Cut bool
}

// DiffLine is one line of a diff: Op is "+" (added), "-" (removed) or " ".
type DiffLine struct {
	Op   string
	Text string
}

// DiffClass is the CSS class of a diff line.
func (l DiffLine) DiffClass() string {
	switch l.Op {
	case "+":
		return "diff-add"
	case "-":
		return "diff-del"
	default:
		return "diff-same"
	}
}

// attemptsPlaceholder is what an empty attempts field means.
func attemptsPlaceholder(n int) string {
	if n == 0 {
		return "each letter's own"
	}
	return int64String(int64(n))
}
