package dlq

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lib/pq"

	"github.com/redrive/redrive/grouping"
)

// An operator's merges and splits of error groups (issue 27), which the
// grouper honours from then on (00103_groups.sql).
//
// A merge moves the letters of several groups of one task and error class
// into one, whose id survives (the oldest, unless the operator picks one);
// the others' ids redirect to it. Where the groups' templates have the same
// key and length, the survivor's template widens to cover them, so that
// future letters like theirs match it. Either way the merged templates are
// kept: the grouper keeps matching them, their letters go to the survivor
// through error_group_merges, and "split off" (UnmergeErrorGroup) restores
// one by moving back the survivor's letters that fit it better.
//
// A split divides a group's letters by the word they have at one variable
// of its template: the most common word keeps the group's id, each other
// gets a new group, and each template has that word fixed, which the
// miner never generalises again. Merging the parts back widens the
// template again.
//
// Each change is one transaction, audited with the operator as the actor,
// and a repeated request changes nothing and answers as the first did.
// The summaries of every group touched (error_groups, dead_letter_inflow)
// are recounted from the letters under a lock that makes letters being
// dead-lettered meanwhile wait: nothing is lost or counted twice.

// Bounds of an operator's change to groups.
const (
	// MaxMergeGroups bounds the groups one merge takes in.
	MaxMergeGroups = 50
	// MaxSplitParts bounds the groups one split makes: a variable with
	// more words is data, which a template cannot tell apart.
	MaxSplitParts = 20
	// MaxGroupEditReason bounds an operator's reason, in characters.
	MaxGroupEditReason = 1000
)

// GroupMergeParams is an operator's merge of error groups.
type GroupMergeParams struct {
	// Group is the group the merge is asked from (its page, its URL).
	Group string
	// Groups are the groups to merge with it.
	Groups []string
	// Survivor is the group that keeps its id: Group or one of Groups.
	// Empty: the oldest, the one the grouper met first.
	Survivor string
	Actor    Actor
	Reason   string
}

// GroupMergeResult is the state a merge left: the same for a repeat.
type GroupMergeResult struct {
	// Survivor is the group whose id the merged groups now mean.
	Survivor string `json:"survivor"`
	// Merged are the ids asked for, but the survivor's, sorted.
	Merged []string `json:"merged"`
	// Template is the survivor's template ("" when it has none).
	Template string `json:"template"`
}

// GroupSplitParams is an operator's split of an error group by the word
// its letters have at one variable of its template.
type GroupSplitParams struct {
	Group string
	// Position is the variable's position in the template's tokens.
	Position int
	Actor    Actor
	Reason   string
}

// GroupSplitResult is what a split made: a repeat answers the same.
type GroupSplitResult struct {
	Group    string `json:"group"`
	Position int    `json:"position"`
	// Parts are the groups the letters went to, the kept group first.
	Parts []GroupSplitPart `json:"parts"`
}

// GroupSplitPart is one word of a split variable and its group.
type GroupSplitPart struct {
	// Word is the word as the grouper compares it: grouping.Wildcard for
	// data (ids, numbers), which the grouper masks.
	Word    string `json:"word"`
	Group   string `json:"group"`
	Letters int64  `json:"letters"`
}

// GroupUnmergeParams splits a group an operator merged off its survivor
// again.
type GroupUnmergeParams struct {
	// Group is the survivor; From the group merged into it.
	Group  string
	From   string
	Actor  Actor
	Reason string
}

// GroupUnmergeResult is the state an unmerge left: the same for a repeat.
type GroupUnmergeResult struct {
	Survivor string `json:"survivor"`
	Group    string `json:"group"`
	Template string `json:"template"`
}

// ReasonProblem says what is wrong with an operator's reason, or "".
func ReasonProblem(reason string) string {
	switch r := strings.TrimSpace(reason); {
	case r == "":
		return "a reason is required: say why, for whoever reads the audit trail"
	case utf8.RuneCountInString(r) > MaxGroupEditReason:
		return fmt.Sprintf("at most %d characters", MaxGroupEditReason)
	case strings.ContainsRune(r, 0) || !utf8.ValidString(r):
		return "must be text (no NUL bytes, valid UTF-8)"
	}
	return ""
}

// IdProblem says what is wrong with a group id given as input, or "".
func IdProblem(id string) string {
	if id == "" || len(id) > 200 || strings.ContainsRune(id, 0) || !utf8.ValidString(id) {
		return "name error groups by their ids, as in /groups/{id}"
	}
	return ""
}

// Validate reports what is wrong with the merge's ids and reason.
func (p GroupMergeParams) Validate() error {
	problems := map[string]string{}
	if msg := ReasonProblem(p.Reason); msg != "" {
		problems["reason"] = msg
	}
	switch {
	case len(p.Groups) == 0:
		problems["groups"] = "name at least one group to merge with this one"
	case len(p.Groups) > MaxMergeGroups:
		problems["groups"] = fmt.Sprintf("at most %d groups at once", MaxMergeGroups)
	case slices.Contains(p.Groups, p.Group):
		problems["groups"] = "a group cannot be merged into itself: name the other groups"
	}
	for _, id := range p.Groups {
		if msg := IdProblem(id); msg != "" {
			problems["groups"] = msg
		}
	}
	if p.Survivor != "" && p.Survivor != p.Group && !slices.Contains(p.Groups, p.Survivor) {
		problems["survivor"] = "the group that keeps its id must be one of the groups merged"
	}
	if len(problems) > 0 {
		return &ValidationError{Fields: problems}
	}
	return nil
}

// Bounds of what the page that merges and splits a group reads.
const (
	// MaxEditOthers bounds the other groups of the task and error class
	// listed for a merge, the latest seen first.
	MaxEditOthers = 200
	// EditSample is how many of a group's newest letters show what a
	// split would make of it.
	EditSample = 2000
	// editTopWords bounds the words shown per variable.
	EditTopWords = 10
)

// GroupEdit is what the page that merges and splits a group shows, masked
// as the letter pages mask what they show.
type GroupEdit struct {
	Group ErrorGroup
	// Template is the group's learned template; HasTemplate is false when
	// it has none (grouped before templates were learned).
	Template    grouping.Template
	HasTemplate bool
	// Others are the live groups of the same task and error class, the
	// latest seen first, at most MaxEditOthers.
	Others []GroupOther
	// Variables has, per variable of the template, the words the newest
	// letters have there: what a split there would make of them.
	Variables []EditVariable
	// Read is how many of the newest letters Variables counts; Unfit how
	// many of them do not fit the template (moved in by a merge).
	Read, Unfit int
	// Merged are the groups operators merged into this one whose
	// templates are kept: each can be split off again.
	Merged []MergedGroup
	// Splits are the standing splits that made or kept this group.
	Splits []GroupSplitRecord
}

// GroupOther is another live group of the same task and error class.
type GroupOther struct {
	ErrorGroup
	// Template is its template as one line, "" when it has none.
	Template string
	// Seq orders groups by when the grouper met them; -1 without a
	// template (older than any).
	Seq int64
}

// EditVariable is one variable of a template and the words the newest
// letters have there.
type EditVariable struct {
	// Position is the variable's position in the template's tokens.
	Position int
	// NotSplittable says why a split cannot divide the letters by this
	// variable; "" when it can.
	NotSplittable string
	// Words are the most common words, most letters first, at most
	// editTopWords; Distinct counts them all.
	Words    []EditWord
	Distinct int
}

// EditWord is one word of a variable.
type EditWord struct {
	// Word is the word as the grouper compares it (grouping.Wildcard for
	// data, which it masks): what a split divides by.
	Word string
	// Text is the message's own text there, masked as the letter's
	// message is.
	Text    string
	Letters int
	// Data: the grouper masks these words (ids, numbers), so a split
	// keeps them together, whatever their text.
	Data bool
}

// MergedGroup is a group an operator merged into another, whose template
// is kept.
type MergedGroup struct {
	ID       string         `db:"from_id"`
	Actor    string         `db:"actor"`
	MergedAt time.Time      `db:"merged_at"`
	Template string         `db:"-"`
	Tokens   pq.StringArray `db:"tokens"`
}

// GroupSplitRecord is one part of a standing split.
type GroupSplitRecord struct {
	// Source is the group that was split at Position; Group holds the
	// letters with Word there.
	Source   string    `db:"source"`
	Position int       `db:"position"`
	Word     string    `db:"value"`
	Group    string    `db:"id"`
	Letters  int64     `db:"letters"`
	Actor    string    `db:"actor"`
	At       time.Time `db:"split_at"`
}
