package groups

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

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/postgres"
)

// groupEditLockKey is the pg_advisory_xact_lock key that serialises the
// operators' changes to groups, so that two of them never interleave.
const groupEditLockKey = 7_240_117_313

// MergeErrorGroups merges the groups p.Groups with p.Group, as an
// operator's choice (audited as group_merge): see the top of this file.
// The groups must be of one task and error class. Ids already merged
// mean their survivors, so a repeated merge finds one group and changes
// nothing.
func (s *Store) MergeErrorGroups(ctx context.Context, p dlq.GroupMergeParams) (dlq.GroupMergeResult, error) {
	if err := p.Validate(); err != nil {
		return dlq.GroupMergeResult{}, err
	}
	var res dlq.GroupMergeResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		asked := append([]string{p.Group}, p.Groups...)
		means, ids, err := lockMergeable(ctx, tx, p, asked)
		if err != nil {
			return err
		}
		templates, err := lockTemplates(ctx, tx, ids)
		if err != nil {
			return err
		}
		survivor := mergeSurvivor(ids, templates, means[p.Survivor])
		res = dlq.GroupMergeResult{Survivor: survivor, Template: templateText(templates[survivor]), Merged: mergedAway(asked, survivor)}
		if len(ids) == 1 {
			return nil // merged already: nothing to do, nothing to audit
		}
		res.Template, err = mergeInto(ctx, tx, p, templates, survivor, ids)
		return err
	})
	if err != nil {
		return dlq.GroupMergeResult{}, fmt.Errorf("merge groups: %w", err)
	}
	return res, nil
}

// lockMergeable locks the operators' group edits and resolves the groups
// asked for: what each id means now (its survivor, for an id merged
// already), and those groups once each, in the order asked. It refuses
// groups that do not exist or are of another failure than p.Group's.
func lockMergeable(ctx context.Context, tx *sqlx.Tx, p dlq.GroupMergeParams, asked []string) (map[string]string, []string, error) {
	if err := lockGroupEdits(ctx, tx); err != nil {
		return nil, nil, err
	}
	means, err := resolveGroups(ctx, tx, asked)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, id := range asked {
		if !slices.Contains(ids, means[id]) {
			ids = append(ids, means[id])
		}
	}
	live, err := liveGroups(ctx, tx, ids)
	if err != nil {
		return nil, nil, err
	}
	return means, ids, sameFailureKind(p, means, live)
}

// mergedAway is the ids asked for that a merge into survivor takes in,
// sorted, once each.
func mergedAway(asked []string, survivor string) []string {
	var merged []string
	for _, id := range asked {
		if id != survivor && !slices.Contains(merged, id) {
			merged = append(merged, id)
		}
	}
	slices.Sort(merged)
	return merged
}

// mergeInto merges the groups ids other than survivor into it: widens its
// template to cover theirs, moves their letters and audits the merge. It
// returns the survivor's template as it now is.
func mergeInto(ctx context.Context, tx *sqlx.Tx, p dlq.GroupMergeParams, templates map[string]grouping.Template, survivor string, ids []string) (string, error) {
	from := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == survivor })
	widened, err := widenSurvivor(ctx, tx, templates, survivor, from)
	if err != nil {
		return "", err
	}
	template := templateText(templates[survivor])
	var moved int64
	if err := tx.GetContext(ctx, &moved, `SELECT error_group_move($1, $2, $3)`, pq.Array(from), survivor, p.Actor.Name); err != nil {
		return "", fmt.Errorf("merge groups into %s: %w", survivor, err)
	}
	return template, auditGroupChange(ctx, tx, p.Actor, dlq.ActionGroupMerge, strings.TrimSpace(p.Reason),
		map[string]int64{"letters": moved, "groups": int64(len(from))},
		map[string]any{"from": from, "into": survivor, "covered": widened, "template": template})
}

// sameFailureKind checks that every group asked for exists and is of the
// task and error class of p.Group.
func sameFailureKind(p dlq.GroupMergeParams, means map[string]string, live map[string]liveGroupRow) error {
	target, ok := live[means[p.Group]]
	if !ok {
		return dlq.Errorf(dlq.ENotFound, "No error group %s.", p.Group)
	}
	for _, id := range slices.Concat(p.Groups, []string{p.Survivor}) {
		if id == "" {
			continue
		}
		g, ok := live[means[id]]
		switch {
		case !ok:
			return &dlq.ValidationError{Fields: map[string]string{"groups": fmt.Sprintf("%s is no error group", id)}}
		case g.Task != target.Task || g.Class != target.Class:
			return &dlq.ValidationError{Fields: map[string]string{"groups": fmt.Sprintf(
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
	if !sameShape(s, o) {
		return nil, nil, nil, false
	}
	tokens, fixed, at, ok = wildcardDifferences(s, o, sPinned, oPinned)
	if !ok || !sharesConstants(tokens, s, o) {
		return nil, nil, nil, false
	}
	return tokens, fixed, at, true
}

// sameShape reports whether s and o are token templates of one key and
// length, the only ones widenFor can join.
func sameShape(s, o grouping.Template) bool {
	return s.Task == o.Task && s.Class == o.Class && s.Place == o.Place && !s.Span && !o.Span && len(s.Tokens) == len(o.Tokens)
}

// wildcardDifferences is s's tokens with a Wildcard at each position where
// o's differ, their fixed flags, and the positions that were not a
// Wildcard free to vary before; ok is false when a differing word is one
// the grouper never lets vary, unless pinned by an operator's split.
func wildcardDifferences(s, o grouping.Template, sPinned, oPinned map[int]bool) (tokens []string, fixed []bool, at []int, ok bool) {
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
	return tokens, fixed, at, true
}

// sharesConstants reports whether the widened tokens keep at least half of
// s's constant words and half of o's.
func sharesConstants(tokens []string, s, o grouping.Template) bool {
	shared := constantsOf(grouping.Template{Tokens: tokens})
	return shared > 0 && 2*shared >= constantsOf(s) && 2*shared >= constantsOf(o)
}

// SplitErrorGroup divides a group's letters by the word they have at one
// variable of its template, as an operator's choice (audited as
// group_split): see the top of this file. Letters that do not fit the
// template (moved in by a merge) stay in the group.
func (s *Store) SplitErrorGroup(ctx context.Context, p dlq.GroupSplitParams) (dlq.GroupSplitResult, error) {
	if msg := dlq.ReasonProblem(p.Reason); msg != "" {
		return dlq.GroupSplitResult{}, &dlq.ValidationError{Fields: map[string]string{"reason": msg}}
	}
	var res dlq.GroupSplitResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		t, ok, err := editableGroup(ctx, tx, p.Group)
		if err != nil {
			return err
		}
		if !ok {
			return dlq.Errorf(dlq.EConflict, "Group %s has no learned template (its letters were grouped before templates were learned): run `redrive groups rebuild` first.", p.Group)
		}
		if done, ok, err := splitDone(ctx, tx, t, p.Position); err != nil || ok {
			res = done
			return err
		}
		if msg := splitProblem(t, p.Position); msg != "" {
			return &dlq.ValidationError{Fields: map[string]string{"position": msg}}
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
		res = dlq.GroupSplitResult{Group: t.ID, Position: p.Position, Parts: parts}
		return writeSplit(ctx, tx, t, p, parts, byWord)
	})
	if err != nil {
		return dlq.GroupSplitResult{}, fmt.Errorf("split group %s: %w", p.Group, err)
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
		return t, false, dlq.Errorf(dlq.EConflict, "Group %s was merged into %s: change that group instead.", id, into)
	}
	live, err := liveGroups(ctx, tx, []string{id})
	if err != nil {
		return t, false, err
	}
	if _, found := live[id]; !found {
		return t, false, dlq.Errorf(dlq.ENotFound, "No error group %s.", id)
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
func splitDone(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p int) (dlq.GroupSplitResult, bool, error) {
	var rows []splitRow
	err := tx.SelectContext(ctx, &rows, `SELECT id, position, value, source, letters FROM error_group_splits
		WHERE source = $1 AND position = $2 ORDER BY letters DESC, value`, t.ID, p)
	if err != nil {
		return dlq.GroupSplitResult{}, false, fmt.Errorf("read splits of %s: %w", t.ID, err)
	}
	kept := slices.IndexFunc(rows, func(r splitRow) bool { return r.ID == t.ID })
	if kept < 0 || p >= len(t.Tokens) || t.Tokens[p] != rows[kept].Value {
		return dlq.GroupSplitResult{}, false, nil
	}
	res := dlq.GroupSplitResult{Group: t.ID, Position: p}
	rows[0], rows[kept] = rows[kept], rows[0]
	var parts []string
	for _, r := range rows {
		res.Parts = append(res.Parts, dlq.GroupSplitPart{Word: r.Value, Group: r.ID, Letters: r.Letters})
		parts = append(parts, r.ID)
	}
	// A part merged back since undid the split.
	var merged bool
	if err := tx.GetContext(ctx, &merged, `SELECT EXISTS (SELECT 1 FROM error_group_merges WHERE from_id = ANY($1))`, pq.Array(parts)); err != nil {
		return dlq.GroupSplitResult{}, false, fmt.Errorf("read merges of %s: %w", t.ID, err)
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
func planSplit(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p int, byWord map[string][]int64) ([]dlq.GroupSplitPart, error) {
	var parts []dlq.GroupSplitPart
	for w, ids := range byWord {
		if w != "" {
			parts = append(parts, dlq.GroupSplitPart{Word: w, Letters: int64(len(ids))})
		}
	}
	switch {
	case len(parts) < 2:
		return nil, &dlq.ValidationError{Fields: map[string]string{"position": "the letters that fit the template all have the same word there: nothing to split"}}
	case len(parts) > dlq.MaxSplitParts:
		return nil, &dlq.ValidationError{Fields: map[string]string{"position": fmt.Sprintf(
			"the letters have %d different words there; a split makes at most %d groups", len(parts), dlq.MaxSplitParts)}}
	}
	slices.SortFunc(parts, func(a, b dlq.GroupSplitPart) int {
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
func writeSplit(ctx context.Context, tx *sqlx.Tx, t grouping.Template, p dlq.GroupSplitParams, parts []dlq.GroupSplitPart, byWord map[string][]int64) error {
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
	return auditGroupChange(ctx, tx, p.Actor, dlq.ActionGroupSplit, strings.TrimSpace(p.Reason),
		map[string]int64{"letters": int64(len(ids)), "groups": int64(len(parts) - 1), "unfit": int64(len(byWord[""]))},
		map[string]any{"group": t.ID, "position": p.Position, "template": templateText(t), "kept": parts[0].Word, "groups": values})
}

const editOthersSQL = `
SELECT g.*, sample.*, coalesce(t.tokens, '{}') AS tokens, coalesce(t.seq, -1) AS seq
FROM (SELECT ` + GroupColumns + ` FROM error_groups
	WHERE task = $1 AND error_class = $2 AND fingerprint <> $3
		AND NOT EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = error_groups.fingerprint)
	ORDER BY last_seen DESC, fingerprint LIMIT $4) g
LEFT JOIN error_templates t ON t.id = g.fingerprint` + GroupSampleJoin + `
ORDER BY g.last_seen DESC, g.fingerprint`

// GroupForEdit returns what the page that merges and splits group id
// shows, masked with p.
func (s *Store) GroupForEdit(ctx context.Context, id string, p mask.Policy) (dlq.GroupEdit, error) {
	var e dlq.GroupEdit
	err := postgres.ReadOnly(ctx, s.db, func(tx *sqlx.Tx) error {
		q := `SELECT g.*, sample.* FROM (SELECT ` + GroupColumns + ` FROM error_groups WHERE fingerprint = $1) g` + GroupSampleJoin
		if err := tx.GetContext(ctx, &e.Group, q, id); err != nil {
			return fmt.Errorf("read group: %w", postgres.Translate(err))
		}
		var rows []struct {
			dlq.ErrorGroup
			Tokens pq.StringArray `db:"tokens"`
			Seq    int64          `db:"seq"`
		}
		if err := tx.SelectContext(ctx, &rows, editOthersSQL, e.Group.Task, e.Group.ErrorClass, id, dlq.MaxEditOthers); err != nil {
			return fmt.Errorf("read groups of %s: %w", e.Group.Task, err)
		}
		for _, r := range rows {
			o := dlq.GroupOther{ErrorGroup: r.ErrorGroup, Template: strings.Join(r.Tokens, " "), Seq: r.Seq}
			o.Template = p.MaskSample(o.Template, o.SampleArgs, o.SampleKwargs)
			o.SampleMessage = p.MaskSample(o.SampleMessage, o.SampleArgs, o.SampleKwargs)
			o.SampleArgs, o.SampleKwargs = nil, nil
			e.Others = append(e.Others, o)
		}
		if err := tx.SelectContext(ctx, &e.Merged, `
			SELECT m.from_id, m.actor, m.merged_at, t.tokens FROM error_group_merges m JOIN error_templates t ON t.id = m.from_id
			WHERE m.into_id = $1 AND m.actor <> $2 ORDER BY m.merged_at DESC, m.from_id LIMIT $3`, id, dlq.SystemActor, dlq.MaxEditOthers); err != nil {
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
		switch err := postgres.Translate(tx.GetContext(ctx, &r, `SELECT `+templateColumns+` FROM error_templates WHERE id = $1`, id)); err {
		case dlq.ErrNotFound:
			return nil
		case nil:
		default:
			return fmt.Errorf("read template of %s: %w", id, err)
		}
		e.Template, e.HasTemplate = r.template(), true
		var letters []variableSample
		if err := tx.SelectContext(ctx, &letters, `SELECT left(error_message, 1000) AS error_message, args, kwargs
			FROM dead_letter_records WHERE fingerprint = $1 ORDER BY failed_at DESC, id DESC LIMIT $2`, id, dlq.EditSample); err != nil {
			return fmt.Errorf("read letters of %s: %w", id, err)
		}
		e.Variables, e.Unfit = editVariables(e.Template, letters, p)
		e.Read = len(letters)
		return nil
	})
	if err != nil {
		return dlq.GroupEdit{}, fmt.Errorf("group %s for edit: %w", id, err)
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
func editVariables(t grouping.Template, letters []variableSample, p mask.Policy) ([]dlq.EditVariable, int) {
	at := t.Variables()
	vars := make([]dlq.EditVariable, len(at))
	counts := make([]map[string]*dlq.EditWord, len(at))
	for i, pos := range at {
		vars[i] = dlq.EditVariable{Position: pos, NotSplittable: splitProblem(t, pos)}
		if t.Tokens[pos] != grouping.Wildcard && !t.Span {
			vars[i].NotSplittable = "the grouper reads this part as a code or as data, whose values it does not tell apart"
		}
		counts[i] = map[string]*dlq.EditWord{}
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
				w = &dlq.EditWord{Word: key, Text: shown, Data: vars[i].NotSplittable == "" && key == grouping.Wildcard}
				counts[i][key] = w
			}
			w.Letters++
		}
	}
	for i := range vars {
		for _, w := range counts[i] {
			vars[i].Words = append(vars[i].Words, *w)
		}
		slices.SortFunc(vars[i].Words, func(a, b dlq.EditWord) int {
			return cmp.Or(cmp.Compare(b.Letters, a.Letters), strings.Compare(a.Word, b.Word))
		})
		vars[i].Distinct = len(vars[i].Words)
		vars[i].Words = vars[i].Words[:min(len(vars[i].Words), dlq.EditTopWords)]
	}
	return vars, unfit
}
