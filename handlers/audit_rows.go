package handlers

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// Audit entries in words, for the audit page and each letter's page.
// Pure functions of the entry, table-tested.

// actionTexts names each audit action as a person would say it.
var actionTexts = map[string]string{
	dlq.ActionReplay:          "Replayed",
	dlq.ActionEditReplay:      "Edited and replayed",
	dlq.ActionDiscard:         "Discarded",
	dlq.ActionRestore:         "Restored",
	dlq.ActionBulkStart:       "Started a bulk operation",
	dlq.ActionBulkFinish:      "Bulk operation finished",
	dlq.ActionBulkCancel:      "Cancelled a bulk operation",
	dlq.ActionCanaryRelease:   "Released the rest after the canary",
	dlq.ActionPurge:           "Purged settled letters",
	dlq.ActionPurgeHeld:       "Held a purge: the group is still growing",
	dlq.ActionPurgeConfirm:    "Confirmed a held purge",
	dlq.ActionRevealArgs:      "Revealed masked arguments",
	dlq.ActionSignIn:          "Signed in",
	dlq.ActionSignInFailed:    "Failed to sign in",
	dlq.ActionUserChange:      "Changed a user",
	dlq.ActionTokenChange:     "Changed an API token",
	dlq.ActionPause:           "Paused",
	dlq.ActionResume:          "Resumed",
	dlq.ActionPauseExpired:    "Pause expired",
	dlq.ActionThrottle:        "Throttled",
	dlq.ActionThrottleChange:  "Changed a throttle",
	dlq.ActionThrottleLift:    "Lifted a throttle",
	dlq.ActionThrottleExpired: "Throttle expired",
	dlq.ActionJobRunNow:       "Ran now",
	dlq.ActionJobKill:         "Killed to the dead letters",
	dlq.ActionJobCancel:       "Asked to cancel a running job",
	dlq.ActionDemo:            "Demo action",
	// A bulk replay's follow-through.
	dlq.ActionCanaryVerdict:     "Canary verdict",
	dlq.ActionBulkAutoPause:     "Auto-paused: replays died again",
	dlq.ActionBulkResume:        "Resumed after the auto-pause",
	dlq.ActionBulkStopFollowing: "Stopped following an operation",
	// Error groups.
	dlq.ActionGroupMerge:    "Merged error groups",
	dlq.ActionGroupSplit:    "Split an error group",
	dlq.ActionGroupUnmerge:  "Split a merged group off again",
	dlq.ActionGroupsRebuild: "Regrouped every letter",
	// Schedules.
	dlq.ActionScheduleDisable: "Disabled a schedule",
	dlq.ActionScheduleEnable:  "Enabled a schedule",
	// Trials and jobs typed in by hand.
	dlq.ActionTestRun:    "Ran one test job (the letter stays pending)",
	dlq.ActionJobEnqueue: "Enqueued a job by hand",
}

func actionText(action string) string {
	if t, ok := actionTexts[action]; ok {
		return t
	}
	return action
}

// countOrder lists outcome counts in the order a person reads them; any
// other count follows in name order.
var countOrder = []string{"matched", "replayed", "replayed_in_source", "discarded", "restored", "skipped", "purged",
	"succeeded", "died_again", "running", "waiting"}

var countLabels = map[string]string{
	"skipped":  "skipped (already replayed or discarded)",
	"replayed": "replayed (enqueued)",
	// A letter of a source that runs its own jobs (River) is replayed
	// there: nothing is enqueued in Redrive.
	"replayed_in_source": "replayed in its source (its job runs again there)",
	"succeeded":          "replays succeeded",
	"died_again":         "replays died again",
	"running":            "replays running",
	"waiting":            "replays waiting",
	"test_runs":          "test job (the letter unchanged)",
	"enqueued":           "job enqueued",
}

// auditCounts turns an entry's counts object into labelled items.
func auditCounts(raw json.RawMessage) []views.CountItem {
	var m map[string]int64
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return rank(a) - rank(b) })
	out := make([]views.CountItem, 0, len(keys))
	for _, k := range keys {
		label := k
		if l, ok := countLabels[k]; ok {
			label = l
		}
		out = append(out, views.CountItem{Label: label, N: views.Number(m[k])})
	}
	return out
}

func rank(k string) int {
	if i := slices.Index(countOrder, k); i >= 0 {
		return i
	}
	return len(countOrder)
}

// auditDetails is the part of an entry's details the pages use.
type auditDetails struct {
	ReplayJobID int64   `json:"replay_job_id"`
	IDs         []int64 `json:"ids"`
	Before      *struct {
		Args   json.RawMessage `json:"args"`
		Kwargs json.RawMessage `json:"kwargs"`
	} `json:"before"`
	After *struct {
		Args   json.RawMessage `json:"args"`
		Kwargs json.RawMessage `json:"kwargs"`
	} `json:"after"`
	StartedAuditEventID int64  `json:"started_audit_event_id"`
	Kind                string `json:"kind"`    // of a bulk operation, or what a pause holds: task or queue
	Name                string `json:"name"`    // of the paused task or queue
	Until               string `json:"until"`   // of a pause, RFC 3339
	Verdict             string `json:"verdict"` // of a canary
	TestJobID           int64  `json:"test_job_id"`
	JobID               int64  `json:"job_id"` // of a job enqueued by hand
}

func parseDetails(raw json.RawMessage) auditDetails {
	var d auditDetails
	_ = json.Unmarshal(raw, &d) // details a page cannot read are shown raw on the entry's page
	return d
}

// detailInt reads one whole number from an entry's details, 0 if absent.
func detailInt(raw json.RawMessage, key string) int64 {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[key]), 10, 64)
	return n
}

// auditRow maps an entry to its view model.
func auditRow(e dlq.AuditEntry) views.AuditRow {
	d := parseDetails(e.Details)
	r := views.AuditRow{
		ID: e.ID, Href: fmt.Sprintf("/audit/%d", e.ID), At: e.At, Actor: e.Actor, Action: e.Action,
		ActionText: entryText(e.Action, d), Counts: auditCounts(e.Counts), Reason: e.Reason,
		RequestID: e.RequestID, RemoteAddr: e.RemoteAddr, UserAgent: e.UserAgent,
	}
	linkEntry(&r, e, d)
	if e.Filter != nil {
		r.Filter, r.FilterHref = filterWords(*e.Filter)
	} else if len(d.IDs) > 0 {
		r.IDs = idList(d.IDs, 20)
	}
	if e.MaxID != nil && e.Action == dlq.ActionBulkStart {
		r.MaxID = *e.MaxID
	}
	if d.Before != nil && d.After != nil {
		for _, fd := range []*views.FieldDiff{
			jsonDiff("args", d.Before.Args, d.After.Args),
			jsonDiff("kwargs", d.Before.Kwargs, d.After.Kwargs),
		} {
			if fd != nil {
				r.Diffs = append(r.Diffs, *fd)
			}
		}
	}
	return r
}

// entryText says what an entry records, with what its details add to its
// action's words: the kind of a bulk operation, a canary's verdict, what
// a pause held.
func entryText(action string, d auditDetails) string {
	switch {
	case action == dlq.ActionBulkStart && d.Kind != "":
		return "Started a bulk " + d.Kind
	case action == dlq.ActionBulkFinish && d.Kind != "":
		return "Bulk " + d.Kind + " finished"
	case action == dlq.ActionCanaryVerdict && d.Verdict == "died":
		return "Canary died again: the operation waits for a decision"
	case action == dlq.ActionCanaryVerdict && d.Verdict == "succeeded":
		return "Canary succeeded: every canary replay ran"
	}
	if d.Name == "" {
		return actionText(action)
	}
	switch action {
	case dlq.ActionPause:
		return "Paused " + d.Kind + " " + d.Name + pauseUntil(d.Until)
	case dlq.ActionResume:
		return "Resumed " + d.Kind + " " + d.Name
	case dlq.ActionPauseExpired:
		return "The pause of " + d.Kind + " " + d.Name + " expired"
	case dlq.ActionScheduleDisable:
		return "Disabled schedule " + d.Name
	case dlq.ActionScheduleEnable:
		return "Enabled schedule " + d.Name
	case dlq.ActionThrottle:
		return "Throttled " + d.Kind + " " + d.Name + pauseUntil(d.Until)
	case dlq.ActionThrottleChange:
		return "Changed the throttle of " + d.Kind + " " + d.Name
	case dlq.ActionThrottleLift:
		return "Lifted the throttle of " + d.Kind + " " + d.Name
	case dlq.ActionThrottleExpired:
		return "The throttle of " + d.Kind + " " + d.Name + " expired"
	}
	return actionText(action)
}

// linkEntry links r to the letter, the replay's job and the operation its
// entry names.
func linkEntry(r *views.AuditRow, e dlq.AuditEntry, d auditDetails) {
	if e.DeadLetterID != nil {
		r.LetterID = *e.DeadLetterID
		r.LetterHref = fmt.Sprintf("/dead-letters/%d", r.LetterID)
	}
	job := d.ReplayJobID
	switch e.Action {
	case dlq.ActionTestRun:
		job = d.TestJobID
	case dlq.ActionJobEnqueue:
		job = d.JobID
	}
	if job != 0 {
		r.JobID, r.JobHref = job, fmt.Sprintf("/jobs/%d", job)
	}
	if e.OperationID != nil {
		r.OperationID = *e.OperationID
		r.OperationHref = fmt.Sprintf("/operations/%d", r.OperationID)
	}
}

// pauseUntil says until when a pause holds, as a pause entry's details
// keep it: " until 2026-12-07 15:04 UTC", or " until someone resumes it".
func pauseUntil(until string) string {
	t, err := time.Parse(time.RFC3339, until)
	if err != nil {
		return " until someone resumes it"
	}
	return " until " + t.UTC().Format("2006-01-02 15:04 UTC")
}

// filterWords turns a stored filter (storedFilterValues) into words
// and a link to the dead-letter list with the same filter.
func filterWords(raw json.RawMessage) (words, href string) {
	v, ok := storedFilterValues(raw)
	if !ok {
		return string(raw), "/dead-letters"
	}
	return selectionWords(v), "/dead-letters?" + v.Encode()
}

// storedFilterValues reads a filter as an operation or an audit entry
// keeps it, in the list's query-string form: the filter's own JSON
// (dlq.Filter), or, in an audit entry written before operations kept that
// (entries are links of the hash chain, never rewritten), the query
// string's values themselves ({"task": ["billing.charge"]}).
func storedFilterValues(raw json.RawMessage) (url.Values, bool) {
	var f dlq.Filter
	if json.Unmarshal(raw, &f) == nil {
		return f.Pinned(), true
	}
	var v url.Values
	if json.Unmarshal(raw, &v) == nil {
		return v, true
	}
	return nil, false
}

// selectionWords says what a list filter selects: "task billing.charge,
// failed since 2026-01-02 15:04 UTC, pending". Times are as stored.
func selectionWords(v url.Values) string {
	labels := []struct{ key, label string }{
		{"task", "task"}, {"queue", "queue"}, {"reason", "reason"}, {"error_class", "error class"},
		{"fingerprint", "error group"}, {"q", "search"}, {"since", "failed since"}, {"until", "failed before"},
	}
	var parts []string
	for _, l := range labels {
		s := v.Get(l.key)
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			s = t.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		switch {
		case l.key == "fingerprint" && strings.Contains(s, ","):
			parts = append(parts, "error groups "+strings.ReplaceAll(s, ",", ", "))
		case s != "":
			parts = append(parts, l.label+" "+s)
		}
	}
	switch s := v.Get("status"); s {
	case "":
		parts = append(parts, "pending")
	case dlq.StatusAll:
		parts = append(parts, "any status")
	default:
		parts = append(parts, s)
	}
	if len(parts) == 1 {
		return "every " + parts[0] + " letter"
	}
	return strings.Join(parts, ", ")
}

// idList shows up to n ids and how many more.
func idList(ids []int64, n int) string {
	var b strings.Builder
	for i, id := range ids {
		if i == n {
			fmt.Fprintf(&b, " and %d more", len(ids)-n)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// detailString reads a string from an audit entry's details; "" when absent.
func detailString(raw json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}
