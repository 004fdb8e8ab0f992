package views

// BulkConfirmView is the confirmation page of a bulk replay or discard:
// exactly what will be acted on, bounded, before anything happens.
type BulkConfirmView struct {
	Action    string // "replay" or "discard"
	Verb      string // "Replay" or "Discard"
	CSRFToken string
	Key       string // the confirm form's one-time key

	// The selection, carried through the confirm form unchanged: every
	// letter matching FilterQuery (AllMatching) or the IDs, never above MaxID.
	AllMatching   bool
	FilterQuery   string
	IDs           []int64
	MaxID         int64
	Selection     string // in words
	SelectionHref string // the list showing the selection, "" for ids

	Matched     int64 // letters the action will apply to
	MatchedText string
	Skipped     int64 // selected but already replayed or discarded
	SkippedText string
	NotFound    int64 // ids that name no letter
	Sample      []DeadLetterRow
	ByTask      []TaskCountRow
	// ByTaskCut: only the largest tasks are listed.
	ByTaskCut bool

	// NeedTyped: over the threshold, the engineer types the number.
	NeedTyped  bool
	Typed      string
	Rate       string
	CanaryOn   bool
	CanarySize string
	// DiedAgain is the died-again guard's percentage ("": none).
	DiedAgain string
	// Target is where, from when and with how many attempts a replay
	// runs, as typed.
	Target ReplayTargetView
	// GuardNeverJudges: the guard is set, but fewer letters than it waits
	// for will settle, so it can never pause this replay.
	GuardNeverJudges bool
	// VersionWarning: the newest letters failed on a build live workers
	// still run ("": none, or a discard).
	VersionWarning string
	Reason         string
	// Problems maps a field ("reason", "typed", "rate_per_second",
	// "canary", "selection") to what is wrong with it.
	Problems map[string]string
	BackHref string
	// Overlaps are open operations already covering some of these letters:
	// a warning, the confirmation still goes ahead if the engineer wants.
	Overlaps []OverlapNotice
}

// OverlapNotice is one open operation that covers some of the letters a
// confirmation is about to act on.
type OverlapNotice struct {
	ID      int64
	Href    string
	Kind    string // "replay" or "discard"
	Actor   string
	State   string // in words: "running", "waiting for release"
	Letters string // how many of these letters it covers ("3,400")
}

// TaskCountRow is one task of a confirmation's breakdown.
type TaskCountRow struct {
	Task string
	N    string
}
