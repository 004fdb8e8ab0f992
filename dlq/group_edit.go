package dlq

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/mask"
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

// groupEditLockKey is the pg_advisory_xact_lock key that serialises the
// operators' changes to groups, so that two of them never interleave.
const groupEditLockKey = 7_240_117_313

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

// reasonProblem says what is wrong with an operator's reason, or "".
func reasonProblem(reason string) string {
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

// idProblem says what is wrong with a group id given as input, or "".
func idProblem(id string) string {
	if id == "" || len(id) > 200 || strings.ContainsRune(id, 0) || !utf8.ValidString(id) {
		return "name error groups by their ids, as in /groups/{id}"
	}
	return ""
}

func (p GroupMergeParams) valid() error {
	problems := map[string]string{}
	if msg := reasonProblem(p.Reason); msg != "" {
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
		if msg := idProblem(id); msg != "" {
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

// MergeErrorGroups merges the groups p.Groups with p.Group, as an
// operator's choice (audited as group_merge): see the top of this file.
// The groups must be of one task and error class. Ids already merged
// mean their survivors, so a repeated merge finds one group and changes
// nothing.
func (s *Store) MergeErrorGroups(ctx context.Context, p GroupMergeParams) (GroupMergeResult, error) {
	if err := p.valid(); err != nil {
		return GroupMergeResult{}, err
	}
	var res GroupMergeResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := lockGroupEdits(ctx, tx); err != nil {
			return err
		}
		asked := append([]string{p.Group}, p.Groups...)
		means, err := resolveGroups(ctx, tx, asked)
		if err != nil {
			return err
		}
		var ids []string
		for _, id := range asked {
			if !slices.Contains(ids, means[id]) {
				ids = append(ids, means[id])
			}
		}
		live, err := liveGroups(ctx, tx, ids)
		if err != nil {
			return err
		}
		if err := sameFailureKind(p, means, live); err != nil {
			return err
		}
		templates, err := lockTemplates(ctx, tx, ids)
		if err != nil {
			return err
		}
		survivor := mergeSurvivor(ids, templates, means[p.Survivor])
		res = GroupMergeResult{Survivor: survivor, Template: templateText(templates[survivor])}
		for _, id := range asked {
			if id != survivor && !slices.Contains(res.Merged, id) {
				res.Merged = append(res.Merged, id)
			}
		}
		slices.Sort(res.Merged)
		if len(ids) == 1 {
			return nil // merged already: nothing to do, nothing to audit
		}
		from := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == survivor })
		widened, err := widenSurvivor(ctx, tx, templates, survivor, from)
		if err != nil {
			return err
		}
		res.Template = templateText(templates[survivor])
		var moved int64
		if err := tx.GetContext(ctx, &moved, `SELECT error_group_move($1, $2, $3)`, pq.Array(from), survivor, p.Actor.Name); err != nil {
			return fmt.Errorf("merge groups into %s: %w", survivor, err)
		}
		return auditGroupChange(ctx, tx, p.Actor, ActionGroupMerge, strings.TrimSpace(p.Reason),
			map[string]int64{"letters": moved, "groups": int64(len(from))},
			map[string]any{"from": from, "into": survivor, "covered": widened, "template": res.Template})
	})
	if err != nil {
		return GroupMergeResult{}, fmt.Errorf("merge groups: %w", err)
	}
	return res, nil
}

// sameFailureKind checks that every group asked for exists and is of the
// task and error class of p.Group.
func sameFailureKind(p GroupMergeParams, means map[string]string, live map[string]liveGroupRow) error {
	target, ok := live[means[p.Group]]
	if !ok {
		return Errorf(ENotFound, "No error group %s.", p.Group)
	}
	for _, id := range slices.Concat(p.Groups, []string{p.Survivor}) {
		if id == "" {
			continue
		}
		g, ok := live[means[id]]
		switch {
		case !ok:
			return &ValidationError{Fields: map[string]string{"groups": fmt.Sprintf("%s is no error group", id)}}
		case g.Task != target.Task || g.Class != target.Class:
			return &ValidationError{Fields: map[string]string{"groups": fmt.Sprintf(
				"%s is a group of %s in %s; only groups of %s in %s can be merged with this one",
				id, g.Class, g.Task, target.Class, target.Task)}}
		}
	}
	return nil
}

// mergeSurvivor picks the group whose id a merge keeps: the operator's
// choice, else the group the grouper met first (lowest seq; a group with
// no template counts as older than any, being from before templates).
func mergeSurvivor(ids []string, templates map[string]grouping.Template, chosen string) string {
	if chosen != "" {
		return chosen
	}
	seq := func(id string) int64 {
		if t, ok := templates[id]; ok {
			return t.Seq
		}
		return -1
	}
	return slices.MinFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(seq(a), seq(b)), strings.Compare(a, b))
	})
}

// widenSurvivor widens the survivor's template to cover the templates of
// from where it can (see widenFor), saving it as a new revision, and
// returns the groups it now covers. The splits whose positions widen are
// over.
func widenSurvivor(ctx context.Context, tx *sqlx.Tx, templates map[string]grouping.Template, survivor string, from []string) ([]string, error) {
	s, ok := templates[survivor]
	if !ok {
		return nil, nil
	}
	pinned, err := pinnedPositions(ctx, tx, append([]string{survivor}, from...))
	if err != nil {
		return nil, err
	}
	var covered []string
	var opened []int
	for _, id := range from {
		o, ok := templates[id]
		if !ok {
			continue
		}
		tokens, fixed, at, ok := widenFor(s, o, pinned[survivor], pinned[id])
		if !ok {
			continue
		}
		s.Tokens, s.Fixed = tokens, fixed
		covered, opened = append(covered, id), append(opened, at...)
	}
	if len(opened) == 0 {
		return covered, nil
	}
	templates[survivor] = s
	if err := updateTemplate(ctx, tx, s); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM error_group_splits WHERE id = $1 AND position = ANY($2)`,
		survivor, pq.Array(opened)); err != nil {
		return nil, fmt.Errorf("end splits of %s: %w", survivor, err)
	}
	return covered, nil
}

// widenFor returns s's template widened to cover o's letters: a Wildcard,
// free to vary, at each position where the two differ; and those
// positions. ok is false when it cannot: another key or length, a span
// template, a differing word that the grouper never lets vary (a quoted
// key, a status code) unless an operator's split fixed it (pinned), or
// templates that share less than half of either's constant words: their
// widened template would take in messages of other failures, so each
// keeps matching its own letters instead.
func widenFor(s, o grouping.Template, sPinned, oPinned map[int]bool) (tokens []string, fixed []bool, at []int, ok bool) {
	if s.Task != o.Task || s.Class != o.Class || s.Place != o.Place || s.Span || o.Span || len(s.Tokens) != len(o.Tokens) {
		return nil, nil, nil, false
	}
	tokens, fixed = slices.Clone(s.Tokens), slices.Clone(fixedOf(s))
	of := fixedOf(o)
	for i := range tokens {
		if tokens[i] == o.Tokens[i] {
			continue
		}
		if fixed[i] && !sPinned[i] || of[i] && !oPinned[i] {
			return nil, nil, nil, false
		}
		if tokens[i] != grouping.Wildcard || fixed[i] {
			at = append(at, i)
		}
		tokens[i], fixed[i] = grouping.Wildcard, false
	}
	shared := constantsOf(grouping.Template{Tokens: tokens})
	if shared == 0 || 2*shared < constantsOf(s) || 2*shared < constantsOf(o) {
		return nil, nil, nil, false
	}
	return tokens, fixed, at, true
}

// SplitErrorGroup divides a group's letters by the word they have at one
// variable of its template, as an operator's choice (audited as
// group_split): see the top of this file. Letters that do not fit the
// template (moved in by a merge) stay in the group.
func (s *Store) SplitErrorGroup(ctx context.Context, p GroupSplitParams) (GroupSplitResult, error) {
	if msg := reasonProblem(p.Reason); msg != "" {
		return GroupSplitResult{}, &ValidationError{Fields: map[string]string{"reason": msg}}
	}
	var res GroupSplitResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		t, ok, err := editableGroup(ctx, tx, p.Group)
		if err != nil {
			return err
		}
		if !ok {
			return Errorf(EConflict, "Group %s has no learned template (its letters were grouped before templates were learned): run `redrive groups rebuild` first.", p.Group)
		}
		if done, ok, err := splitDone(ctx, tx, t, p.Position); err != nil || ok {
			res = done
			return err
		}
		if msg := splitProblem(t, p.Position); msg != "" {
			return &ValidationError{Fields: map[string]string{"position": msg}}
		}
		if err := lockSummaries(ctx, tx); err != nil {
			return err
		}
		byWord, err := lettersByWord(ctx, tx, t, p.Position)
		if err != nil {
			return err
		}
		parts, err := planSplit(ctx, tx, t, p.Position, byWord)
		if err != nil {
			return err
		}
		res = GroupSplitResult{Group: t.ID, Position: p.Position, Parts: parts}
		return writeSplit(ctx, tx, t, p, parts, byWord)
	})
	if err != nil {
		return GroupSplitResult{}, fmt.Errorf("split group %s: %w", p.Group, err)
	}
	return res, nil
}

// editableGroup locks the edits and returns the template of the live
// group id (ok false when it has none), or why it cannot be changed.
func editableGroup(ctx context.Context, tx *sqlx.Tx, id string) (t grouping.Template, ok bool, err error) {
	if err := lockGroupEdits(ctx, tx); err != nil {
		return t, false, err
	}
	into, err := survivorIn(ctx, tx, id)
	if err != nil {
		return t, false, err
	}
	if into != id {
		return t, false, Errorf(EConflict, "Group %s was merged into %s: change that group instead.", id, into)
	}
	live, err := liveGroups(ctx, tx, []string{id})
	if err != nil {
		return t, false, err
	}
	if _, found := live[id]; !found {
		return t, false, Errorf(ENotFound, "No error group %s.", id)
	}
	ts, err := lockTemplates(ctx, tx, []string{id})
	if err != nil {
		return t, false, err
	}
	t, ok = ts[id]
	return t, ok, nil
}

// splitRow is one row of error_group_splits.
type splitRow struct {
	ID       string `db:"id"`
	Position int    `db:"position"`
	Value    string `db:"value"`
	Source   string `db:"source"`
	Letters  int64  `db:"letters"`
}

// splitDone returns the result of the split of t at p when that split
// was made and still stands: t keeps the word it kept there.
func splitDone(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p int) (GroupSplitResult, bool, error) {
	var rows []splitRow
	err := tx.SelectContext(ctx, &rows, `SELECT id, position, value, source, letters FROM error_group_splits
		WHERE source = $1 AND position = $2 ORDER BY letters DESC, value`, t.ID, p)
	if err != nil {
		return GroupSplitResult{}, false, fmt.Errorf("read splits of %s: %w", t.ID, err)
	}
	kept := slices.IndexFunc(rows, func(r splitRow) bool { return r.ID == t.ID })
	if kept < 0 || p >= len(t.Tokens) || t.Tokens[p] != rows[kept].Value {
		return GroupSplitResult{}, false, nil
	}
	res := GroupSplitResult{Group: t.ID, Position: p}
	rows[0], rows[kept] = rows[kept], rows[0]
	var parts []string
	for _, r := range rows {
		res.Parts = append(res.Parts, GroupSplitPart{Word: r.Value, Group: r.ID, Letters: r.Letters})
		parts = append(parts, r.ID)
	}
	// A part merged back since undid the split.
	var merged bool
	if err := tx.GetContext(ctx, &merged, `SELECT EXISTS (SELECT 1 FROM error_group_merges WHERE from_id = ANY($1))`, pq.Array(parts)); err != nil {
		return GroupSplitResult{}, false, fmt.Errorf("read merges of %s: %w", t.ID, err)
	}
	return res, !merged, nil
}

// splitProblem says why t cannot be split at position p, or "".
func splitProblem(t grouping.Template, p int) string {
	switch {
	case t.Span:
		return "this template matches messages of several lengths, whose variables take any number of words; it cannot be split by one of them"
	case p < 0 || p >= len(t.Tokens):
		return fmt.Sprintf("the template has %d words: a position is 0 to %d", len(t.Tokens), len(t.Tokens)-1)
	case t.Tokens[p] != grouping.Wildcard:
		return fmt.Sprintf("word %d (%q) is not a variable of the template: only its <*> parts can be split by", p, t.Tokens[p])
	}
	return ""
}

// lettersByWord reads the ids of the group's letters by the word each has
// at position p of t; letters that do not fit t are under "".
func lettersByWord(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p int) (map[string][]int64, error) {
	rows, err := tx.QueryxContext(ctx, `SELECT id, left(error_message, 1000) FROM dead_letter_records WHERE fingerprint = $1`, t.ID)
	if err != nil {
		return nil, fmt.Errorf("read letters of %s: %w", t.ID, err)
	}
	defer rows.Close()
	out := map[string][]int64{}
	for rows.Next() {
		var id int64
		var msg string
		if err := rows.Scan(&id, &msg); err != nil {
			return nil, fmt.Errorf("read letters of %s: %w", t.ID, err)
		}
		word := ""
		if words, ok := t.Words(msg); ok {
			word = words[p]
		}
		out[word] = append(out[word], id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read letters of %s: %w", t.ID, err)
	}
	return out, nil
}

// planSplit names the groups of a split: the most common word keeps t's
// id, each other word gets a new one.
func planSplit(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p int, byWord map[string][]int64) ([]GroupSplitPart, error) {
	var parts []GroupSplitPart
	for w, ids := range byWord {
		if w != "" {
			parts = append(parts, GroupSplitPart{Word: w, Letters: int64(len(ids))})
		}
	}
	switch {
	case len(parts) < 2:
		return nil, &ValidationError{Fields: map[string]string{"position": "the letters that fit the template all have the same word there: nothing to split"}}
	case len(parts) > MaxSplitParts:
		return nil, &ValidationError{Fields: map[string]string{"position": fmt.Sprintf(
			"the letters have %d different words there; a split makes at most %d groups", len(parts), MaxSplitParts)}}
	}
	slices.SortFunc(parts, func(a, b GroupSplitPart) int {
		return cmp.Or(cmp.Compare(b.Letters, a.Letters), strings.Compare(a.Word, b.Word))
	})
	parts[0].Group = t.ID
	for i := 1; i < len(parts); i++ {
		id, err := splitID(ctx, tx, t, splitTemplate(t, p, parts[i].Word).Tokens)
		if err != nil {
			return nil, err
		}
		parts[i].Group = id
	}
	return parts, nil
}

// splitTemplate returns t with word at position p, fixed unless it is
// data (Wildcard): the template of the part of a split with that word.
func splitTemplate(t grouping.Template, p int, word string) grouping.Template {
	t.Tokens, t.Fixed = slices.Clone(t.Tokens), slices.Clone(fixedOf(t))
	t.Tokens[p], t.Fixed[p] = word, word != grouping.Wildcard
	return t
}

// splitID names a new part of a split of t, derived from its key and
// template as the grouper derives a new group's id. A group merged into t
// (by the grouper or an operator) with that id takes it back: splitting
// what was merged restores the old group, and old links to it lead to its
// letters again. An id taken otherwise is derived again.
func splitID(ctx context.Context, tx *sqlx.Tx, t grouping.Template, tokens []string) (string, error) {
	seed := t.Task + "\x00" + t.Class + "\x00" + t.Place + "\x00" + strings.Join(tokens, "\x00")
	for n := 0; n < 100; n++ {
		salted := seed
		if n > 0 {
			salted += "\x00" + strconv.Itoa(n)
		}
		sum := sha256.Sum256([]byte(salted))
		id := hex.EncodeToString(sum[:8])
		var taken, mergedHere bool
		err := tx.QueryRowxContext(ctx, `
			SELECT EXISTS (SELECT 1 FROM error_templates WHERE id = $1)
				OR EXISTS (SELECT 1 FROM error_groups WHERE fingerprint = $1)
				OR EXISTS (SELECT 1 FROM error_group_merges WHERE from_id = $1),
			EXISTS (SELECT 1 FROM error_group_merges WHERE from_id = $1 AND into_id = $2)
				AND NOT EXISTS (SELECT 1 FROM error_groups WHERE fingerprint = $1)`, id, t.ID).Scan(&taken, &mergedHere)
		if err != nil {
			return "", fmt.Errorf("name a part of group %s: %w", t.ID, err)
		}
		if !taken || mergedHere {
			return id, nil
		}
	}
	return "", fmt.Errorf("name a part of group %s: every id derived is taken", t.ID)
}

// writeSplit moves the letters of each part but the kept one to its
// group, writes the parts' templates, recounts the summaries and audits.
func writeSplit(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p GroupSplitParams, parts []GroupSplitPart, byWord map[string][]int64) error {
	var seq int64
	if err := tx.GetContext(ctx, &seq, `SELECT coalesce(max(seq), 0) FROM error_templates WHERE task = $1 AND error_class = $2 AND place = $3`,
		t.Task, t.Class, t.Place); err != nil {
		return fmt.Errorf("read templates of %s: %w", t.Task, err)
	}
	var ids []int64
	var to, groups []string
	values := map[string]string{}
	for i, part := range parts {
		nt := splitTemplate(t, p.Position, part.Word)
		nt.ID = part.Group
		if i > 0 {
			nt.Seq = seq + int64(i) // younger than every group of the key
			for _, id := range byWord[part.Word] {
				ids, to = append(ids, id), append(to, part.Group)
			}
		}
		if err := updateTemplate(ctx, tx, nt); err != nil {
			return err
		}
		groups, values[part.Word] = append(groups, part.Group), part.Group
	}
	if err := moveLetters(ctx, tx, ids, to); err != nil {
		return err
	}
	// A part that takes back the id of a group merged into t is that
	// group again.
	if _, err := tx.ExecContext(ctx, `DELETE FROM error_group_merges WHERE from_id = ANY($1)`, pq.Array(groups)); err != nil {
		return fmt.Errorf("restore merged groups: %w", err)
	}
	if err := recountGroups(ctx, tx, groups); err != nil {
		return err
	}
	for _, part := range parts {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO error_group_splits (id, position, value, source, letters, actor) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id, position) DO UPDATE SET value = EXCLUDED.value, source = EXCLUDED.source,
				letters = EXCLUDED.letters, actor = EXCLUDED.actor, split_at = now()`,
			part.Group, p.Position, part.Word, t.ID, part.Letters, p.Actor.Name); err != nil {
			return fmt.Errorf("record split of %s: %w", t.ID, err)
		}
	}
	return auditGroupChange(ctx, tx, p.Actor, ActionGroupSplit, strings.TrimSpace(p.Reason),
		map[string]int64{"letters": int64(len(ids)), "groups": int64(len(parts) - 1), "unfit": int64(len(byWord[""]))},
		map[string]any{"group": t.ID, "position": p.Position, "template": templateText(t), "kept": parts[0].Word, "groups": values})
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
	editTopWords = 10
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

const editOthersSQL = `
SELECT g.*, sample.*, coalesce(t.tokens, '{}') AS tokens, coalesce(t.seq, -1) AS seq
FROM (SELECT ` + groupColumns + ` FROM error_groups
	WHERE task = $1 AND error_class = $2 AND fingerprint <> $3
		AND NOT EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = error_groups.fingerprint)
	ORDER BY last_seen DESC, fingerprint LIMIT $4) g
LEFT JOIN error_templates t ON t.id = g.fingerprint` + groupSampleJoin + `
ORDER BY g.last_seen DESC, g.fingerprint`

// GroupForEdit returns what the page that merges and splits group id
// shows, masked with p.
func (s *Store) GroupForEdit(ctx context.Context, id string, p mask.Policy) (GroupEdit, error) {
	var e GroupEdit
	err := s.readOnly(ctx, func(tx *sqlx.Tx) error {
		q := `SELECT g.*, sample.* FROM (SELECT ` + groupColumns + ` FROM error_groups WHERE fingerprint = $1) g` + groupSampleJoin
		if err := tx.GetContext(ctx, &e.Group, q, id); err != nil {
			return fmt.Errorf("read group: %w", translate(err))
		}
		var rows []struct {
			ErrorGroup
			Tokens pq.StringArray `db:"tokens"`
			Seq    int64          `db:"seq"`
		}
		if err := tx.SelectContext(ctx, &rows, editOthersSQL, e.Group.Task, e.Group.ErrorClass, id, MaxEditOthers); err != nil {
			return fmt.Errorf("read groups of %s: %w", e.Group.Task, err)
		}
		for _, r := range rows {
			o := GroupOther{ErrorGroup: r.ErrorGroup, Template: strings.Join(r.Tokens, " "), Seq: r.Seq}
			o.Template = p.MaskSample(o.Template, o.SampleArgs, o.SampleKwargs)
			o.SampleMessage = p.MaskSample(o.SampleMessage, o.SampleArgs, o.SampleKwargs)
			o.SampleArgs, o.SampleKwargs = nil, nil
			e.Others = append(e.Others, o)
		}
		if err := tx.SelectContext(ctx, &e.Merged, `
			SELECT m.from_id, m.actor, m.merged_at, t.tokens FROM error_group_merges m JOIN error_templates t ON t.id = m.from_id
			WHERE m.into_id = $1 AND m.actor <> $2 ORDER BY m.merged_at DESC, m.from_id LIMIT $3`, id, SystemActor, MaxEditOthers); err != nil {
			return fmt.Errorf("read merges into %s: %w", id, err)
		}
		for i := range e.Merged {
			e.Merged[i].Template = p.MaskText(strings.Join(e.Merged[i].Tokens, " "), nil, nil)
		}
		if err := tx.SelectContext(ctx, &e.Splits, `
			SELECT s.source, s.position, s.value, s.id, s.letters, s.actor, s.split_at FROM error_group_splits s
			WHERE (s.source = $1 OR s.id = $1) AND NOT EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = s.id)
			ORDER BY s.source, s.position, s.letters DESC, s.value`, id); err != nil {
			return fmt.Errorf("read splits of %s: %w", id, err)
		}
		var r templateRow
		switch err := translate(tx.GetContext(ctx, &r, `SELECT `+templateColumns+` FROM error_templates WHERE id = $1`, id)); err {
		case ErrNotFound:
			return nil
		case nil:
		default:
			return fmt.Errorf("read template of %s: %w", id, err)
		}
		e.Template, e.HasTemplate = r.template(), true
		var letters []variableSample
		if err := tx.SelectContext(ctx, &letters, `SELECT left(error_message, 1000) AS error_message, args, kwargs
			FROM dead_letter_records WHERE fingerprint = $1 ORDER BY failed_at DESC, id DESC LIMIT $2`, id, EditSample); err != nil {
			return fmt.Errorf("read letters of %s: %w", id, err)
		}
		e.Variables, e.Unfit = editVariables(e.Template, letters, p)
		e.Read = len(letters)
		return nil
	})
	if err != nil {
		return GroupEdit{}, fmt.Errorf("group %s for edit: %w", id, err)
	}
	e.Group.SampleMessage = p.MaskSample(e.Group.SampleMessage, e.Group.SampleArgs, e.Group.SampleKwargs)
	e.Group.SampleArgs, e.Group.SampleKwargs = nil, nil
	return e, nil
}

// variableSample is a letter as the edit page reads it.
type variableSample struct {
	Message string          `db:"error_message"`
	Args    json.RawMessage `db:"args"`
	Kwargs  json.RawMessage `db:"kwargs"`
}

// editVariables counts, per variable of t, the words letters have there,
// and how many letters do not fit t. A split can divide by a Wildcard of
// a template of fixed length: words are counted as the grouper compares
// them, with the message's text (masked) to show. Other variables are
// counted by their text, to show.
func editVariables(t grouping.Template, letters []variableSample, p mask.Policy) ([]EditVariable, int) {
	at := t.Variables()
	vars := make([]EditVariable, len(at))
	counts := make([]map[string]*EditWord, len(at))
	for i, pos := range at {
		vars[i] = EditVariable{Position: pos, NotSplittable: splitProblem(t, pos)}
		if t.Tokens[pos] != grouping.Wildcard && !t.Span {
			vars[i].NotSplittable = "the grouper reads this part as a code or as data, whose values it does not tell apart"
		}
		counts[i] = map[string]*EditWord{}
	}
	unfit := 0
	for _, l := range letters {
		values, ok := t.Values(l.Message)
		if !ok {
			unfit++
			continue
		}
		words, _ := t.Words(l.Message)
		text := p.TextMask(l.Args, l.Kwargs)
		for i, pos := range at {
			shown := text.Apply(values[i])
			key := shown
			if vars[i].NotSplittable == "" && words != nil {
				key = words[pos]
			}
			w := counts[i][key]
			if w == nil {
				w = &EditWord{Word: key, Text: shown, Data: vars[i].NotSplittable == "" && key == grouping.Wildcard}
				counts[i][key] = w
			}
			w.Letters++
		}
	}
	for i := range vars {
		for _, w := range counts[i] {
			vars[i].Words = append(vars[i].Words, *w)
		}
		slices.SortFunc(vars[i].Words, func(a, b EditWord) int {
			return cmp.Or(cmp.Compare(b.Letters, a.Letters), strings.Compare(a.Word, b.Word))
		})
		vars[i].Distinct = len(vars[i].Words)
		vars[i].Words = vars[i].Words[:min(len(vars[i].Words), editTopWords)]
	}
	return vars, unfit
}
