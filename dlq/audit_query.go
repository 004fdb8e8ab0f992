package dlq

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Reading the audit trail: the /audit page, its exports, the API, and each
// letter's own history. Entries are listed newest first by id, which is the
// order the chain was written in (appendAudit serialises writers), and
// continue with a keyset cursor on id: the next page holds entries with a
// smaller id, found by one range scan of the primary key however deep.

// AuditActions lists every action an entry may record, for the filter.
var AuditActions = []string{
	ActionReplay, ActionEditReplay, ActionDiscard, ActionRestore, ActionBulkStart, ActionBulkFinish,
	ActionBulkCancel, ActionCanaryRelease, ActionPurge, ActionPurgeHeld, ActionPurgeConfirm, ActionRevealArgs, ActionSignIn, ActionSignInFailed,
	ActionUserChange, ActionTokenChange, ActionJobRunNow, ActionJobKill, ActionJobCancel,
	ActionCanaryVerdict, ActionBulkAutoPause, ActionBulkResume, ActionBulkStopFollowing,
	ActionPause, ActionResume, ActionPauseExpired, ActionThrottle, ActionThrottleChange, ActionThrottleLift, ActionThrottleExpired,
	ActionGroupMerge, ActionGroupSplit, ActionGroupUnmerge, ActionGroupsRebuild,
	ActionScheduleDisable, ActionScheduleEnable, ActionTestRun, ActionJobEnqueue,
}

// SessionActions are the entries of people signing in (or failing to):
// many, routine, and in the way when reading what was done to letters and
// jobs. AuditFilter.HideSessions leaves them out, and with them a user's
// own "sign out everywhere" (a user_change of op signout on oneself); an
// admin ending someone else's sessions stays.
var SessionActions = []string{ActionSignIn, ActionSignInFailed}

// Page sizes of the audit list.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

// AuditFilter narrows the audit trail. Every field has a query-string form
// (handlers.ParseAuditFilter, Values); zero values do not filter.
type AuditFilter struct {
	Actor  string
	Action string
	// DeadLetterID matches entries about one letter: those naming it, and
	// bulk entries that link it in audit_event_letters.
	DeadLetterID int64
	Since        TimeBound
	Until        TimeBound
	Limit        int
	// Before continues the list with entries whose id is smaller; 0 is the
	// newest page.
	Before int64
	// HideSessions leaves out sign-ins and other session entries
	// (SessionActions).
	HideSessions bool
}

// Validate reports every field of f that is out of bounds, as a
// *ValidationError keyed by the query-string name of the field.
func (f AuditFilter) Validate() error {
	problems := map[string]string{}
	if len(f.Actor) > 200 || !printable(f.Actor) {
		problems["actor"] = "must be at most 200 printable characters"
	}
	if f.Action != "" && !slices.Contains(AuditActions, f.Action) {
		problems["action"] = "must be one of " + strings.Join(AuditActions, ", ")
	}
	if f.DeadLetterID < 0 {
		problems["dead_letter_id"] = "must be a positive whole number"
	}
	if f.Before < 0 {
		problems["cursor"] = "must be a positive whole number"
	}
	timeRangeProblems(f.Since, f.Until, problems)
	if f.Limit < 0 || f.Limit > MaxAuditLimit {
		problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxAuditLimit)
	}
	if len(problems) > 0 {
		return &ValidationError{Fields: problems}
	}
	return nil
}

// Values encodes f as a query string that handlers.ParseAuditFilter reads back;
// the default limit is left out.
func (f AuditFilter) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("actor", f.Actor)
	set("action", f.Action)
	if f.DeadLetterID > 0 {
		v.Set("dead_letter_id", strconv.FormatInt(f.DeadLetterID, 10))
	}
	set("since", f.Since.Raw)
	set("until", f.Until.Raw)
	if f.HideSessions {
		v.Set("hide_sign_ins", "1")
	}
	if f.Limit != DefaultAuditLimit && f.Limit != 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Before > 0 {
		v.Set("cursor", strconv.FormatInt(f.Before, 10))
	}
	return v
}

// Narrowed reports whether f filters by anything.
func (f AuditFilter) Narrowed() bool {
	return f.Actor != "" || f.Action != "" || f.DeadLetterID > 0 || !f.Since.IsZero() || !f.Until.IsZero() || f.HideSessions
}

// AuditPage is one page of the audit trail.
type AuditPage struct {
	Entries []AuditEntry
	// Next continues after the last entry (pass it as Before); 0 on the
	// last page.
	Next int64
}

// AuditLetter is one letter an entry touched, with what happened to it and
// where the letter is now (Task and Status are empty when it was purged).
type AuditLetter struct {
	DeadLetterID int64  `db:"dead_letter_id" json:"dead_letter_id"`
	Outcome      string `db:"outcome" json:"outcome"`
	Task         string `db:"task" json:"task,omitempty"`
	Status       Status `db:"status" json:"status,omitempty"`
}

// SkipCounts says why an operation skipped the letters it did not act on.
type SkipCounts struct {
	Replayed  int64 // already replayed (by someone else, or before)
	Discarded int64 // discarded
	NotFound  int64 // ids that name no letter (purged, or never existed)
}

// UniqueIDs returns ids sorted, each once.
func UniqueIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
