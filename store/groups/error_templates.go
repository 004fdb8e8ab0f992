package groups

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
)

// templateStore keeps a grouping.Grouper's learning in error_templates and
// error_group_merges (00103_groups.sql).
type templateStore struct {
	s *Store
}

var _ grouping.Store = templateStore{}

type templateRow struct {
	ID     string         `db:"id"`
	Task   string         `db:"task"`
	Class  string         `db:"error_class"`
	Place  string         `db:"place"`
	Tokens pq.StringArray `db:"tokens"`
	Fixed  pq.BoolArray   `db:"fixed"`
	Span   bool           `db:"span"`
	Seq    int64          `db:"seq"`
	Rev    int64          `db:"rev"`
}

const templateColumns = `id, task, error_class, place, tokens, fixed, span, seq, rev`

func (r templateRow) template() grouping.Template {
	return grouping.Template{ID: r.ID, Task: r.Task, Class: r.Class, Place: r.Place,
		Tokens: []string(r.Tokens), Fixed: []bool(r.Fixed), Span: r.Span, Seq: r.Seq, Rev: r.Rev}
}

// Templates returns the live templates of one key.
func (t templateStore) Templates(ctx context.Context, task, class, place string) ([]grouping.Template, error) {
	var rows []templateRow
	err := t.s.db.SelectContext(ctx, &rows, `
		SELECT `+templateColumns+` FROM error_templates
		WHERE task = $1 AND error_class = $2 AND place = $3 ORDER BY seq`, task, class, place)
	if err != nil {
		return nil, fmt.Errorf("read templates: %w", err)
	}
	out := make([]grouping.Template, len(rows))
	for i, r := range rows {
		out[i] = r.template()
	}
	return out, nil
}

// Learned saves a new or wider template and merges the groups merged into
// it, with an audit entry for the merge (a system action), in one
// transaction. A template an operator changed since the grouper read it
// (its rev moved on) is left as it is: grouping.ErrStale.
func (t templateStore) Learned(ctx context.Context, tpl grouping.Template, merged []string) error {
	return postgres.InTx(ctx, t.s.db, func(tx *sqlx.Tx) error {
		var rev int64
		err := tx.GetContext(ctx, &rev, `SELECT rev FROM error_templates WHERE id = $1 FOR UPDATE`, tpl.ID)
		switch err := postgres.Translate(err); {
		case err == nil && rev != tpl.Rev:
			return grouping.ErrStale
		case err != nil && err != dlq.ErrNotFound:
			return fmt.Errorf("read template %s: %w", tpl.ID, err)
		}
		if err := saveTemplates(ctx, tx, []grouping.Template{tpl}); err != nil {
			return err
		}
		if len(merged) == 0 {
			return nil
		}
		// The template may be one an operator merged into another group:
		// what it takes in goes where its own letters go.
		into, err := survivorIn(ctx, tx, tpl.ID)
		if err != nil {
			return err
		}
		return mergeGroups(ctx, tx, merged, into, dlq.Actor{Name: dlq.SystemActor}, "the grouper learned that these groups are one failure")
	})
}

// survivorIn returns the live group id means in tx: the group it was
// merged into, or itself.
func survivorIn(ctx context.Context, tx *sqlx.Tx, id string) (string, error) {
	var into string
	switch err := postgres.Translate(tx.GetContext(ctx, &into, `SELECT into_id FROM error_group_merges WHERE from_id = $1`, id)); err {
	case nil:
		return into, nil
	case dlq.ErrNotFound:
		return id, nil
	default:
		return "", fmt.Errorf("read merges of group %s: %w", id, err)
	}
}

// saveTemplatesSQL inserts templates at their revision (a regrouping keeps
// an operator's), and updates what learning changed, never the revision.
const saveTemplatesSQL = `
INSERT INTO error_templates AS t (id, task, error_class, place, tokens, fixed, span, seq, rev)
SELECT x.id, x.task, x.error_class, x.place, string_to_array(x.tokens, E'\x1f'),
	string_to_array(x.fixed, ',')::boolean[], x.span, x.seq, x.rev
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[], $8::bigint[], $9::bigint[])
	AS x(id, task, error_class, place, tokens, fixed, span, seq, rev)
ON CONFLICT (id) DO UPDATE SET tokens = EXCLUDED.tokens, fixed = EXCLUDED.fixed, span = EXCLUDED.span, updated_at = now()
WHERE (t.tokens, t.fixed, t.span) IS DISTINCT FROM (EXCLUDED.tokens, EXCLUDED.fixed, EXCLUDED.span)`

// saveTemplates upserts templates in one statement. Tokens travel joined
// by the unit separator, which tokenize never keeps in a token.
func saveTemplates(ctx context.Context, tx *sqlx.Tx, ts []grouping.Template) error {
	n := len(ts)
	ids, tasks, classes, places := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tokens, fixed, spans, seqs := make([]string, n), make([]string, n), make([]bool, n), make([]int64, n)
	revs := make([]int64, n)
	for i, t := range ts {
		ids[i], tasks[i], classes[i], places[i], spans[i], seqs[i], revs[i] = t.ID, t.Task, t.Class, t.Place, t.Span, t.Seq, t.Rev
		tokens[i] = strings.Join(t.Tokens, "\x1f")
		fixed[i] = joinBools(t.Fixed, len(t.Tokens))
	}
	_, err := tx.ExecContext(ctx, saveTemplatesSQL, pq.Array(ids), pq.Array(tasks), pq.Array(classes),
		pq.Array(places), pq.Array(tokens), pq.Array(fixed), pq.Array(spans), pq.Array(seqs), pq.Array(revs))
	if err != nil {
		return fmt.Errorf("save %d templates: %w", n, err)
	}
	return nil
}

func joinBools(bs []bool, n int) string {
	out := make([]byte, 0, 6*n)
	for i := 0; i < n; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		if i < len(bs) && bs[i] {
			out = append(out, "true"...)
		} else {
			out = append(out, "false"...)
		}
	}
	return string(out)
}

// mergeGroups moves the letters of the groups from into the group into,
// records the merge (from then on their ids redirect) and audits it. A
// group already merged into into is left out, so that two workers
// learning the same merge audit it once.
func mergeGroups(ctx context.Context, tx *sqlx.Tx, from []string, into string, actor dlq.Actor, reason string) error {
	var todo []string
	err := tx.SelectContext(ctx, &todo, `
		SELECT f FROM unnest($1::text[]) f
		WHERE f <> $2 AND NOT EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = f AND m.into_id = $2)
		ORDER BY f`, pq.Array(from), into)
	if err != nil {
		return fmt.Errorf("merge groups into %s: %w", into, err)
	}
	if len(todo) == 0 {
		return nil
	}
	var moved int64
	if err := tx.GetContext(ctx, &moved, `SELECT error_group_move($1, $2, $3)`, pq.Array(todo), into, actor.Name); err != nil {
		return fmt.Errorf("merge groups into %s: %w", into, err)
	}
	return auditGroupChange(ctx, tx, actor, dlq.ActionGroupMerge, reason,
		map[string]int64{"letters": moved}, map[string]any{"from": todo, "into": into})
}

// auditGroupChange writes the audit entry of a change to error groups.
func auditGroupChange(ctx context.Context, tx *sqlx.Tx, actor dlq.Actor, action, reason string, counts map[string]int64, details any) error {
	c, err := json.Marshal(counts)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	d, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	_, err = audit.AppendAudit(ctx, tx, dlq.AuditEntry{At: time.Now(), Actor: actor.Name, Action: action,
		Reason: reason, RequestID: actor.RequestID, RemoteAddr: actor.RemoteAddr, UserAgent: actor.UserAgent,
		Counts: c, Details: d})
	return err
}

// GroupSurvivor returns the live group a group id means: the id itself, or
// the group it was merged into.
func (s *Store) GroupSurvivor(ctx context.Context, id string) (string, bool, error) {
	var into string
	err := s.db.GetContext(ctx, &into, `SELECT into_id FROM error_group_merges WHERE from_id = $1`, id)
	switch postgres.Translate(err) {
	case nil:
		return into, true, nil
	case dlq.ErrNotFound:
		return id, false, nil
	default:
		return "", false, fmt.Errorf("read merges of group %s: %w", id, err)
	}
}

// GroupTemplate returns a group's learned template, Wildcard where its
// letters differ, or ErrNotFound.
func (s *Store) GroupTemplate(ctx context.Context, id string) (grouping.Template, error) {
	var r templateRow
	err := s.db.GetContext(ctx, &r, `SELECT `+templateColumns+` FROM error_templates WHERE id = $1`, id)
	if err != nil {
		return grouping.Template{}, fmt.Errorf("read template of group %s: %w", id, postgres.Translate(err))
	}
	return r.template(), nil
}

// GroupOf returns the error group of a new letter, learning from it.
func (s *Store) GroupOf(ctx context.Context, task, class, message, traceback string) (string, error) {
	return s.grouper.Group(ctx, grouping.Letter{Task: task, Class: class, Message: message, Traceback: traceback})
}

// GroupLetter assigns a letter to its error group as dead-lettering does,
// learning from it: for bulk loads (the seed) that write letters
// themselves.
func (s *Store) GroupLetter(ctx context.Context, l grouping.Letter) (string, error) {
	return s.grouper.Group(ctx, l)
}

// SweepMergedGroups moves the letters still filed under a merged group
// into the group it was merged into, and returns how many it moved. Such
// letters were on their way when the merge happened: a bulk load grouped
// before it, or a worker's insert that ran beside it.
func (s *Store) SweepMergedGroups(ctx context.Context) (int64, error) {
	var moved int64
	err := s.db.GetContext(ctx, &moved, `
		SELECT coalesce(sum(error_group_move(stray.ids, stray.into_id, stray.actor)), 0)::bigint
		FROM (SELECT m.into_id, min(m.actor) AS actor, array_agg(m.from_id ORDER BY m.from_id) AS ids
			FROM error_group_merges m JOIN error_groups g ON g.fingerprint = m.from_id
			GROUP BY m.into_id ORDER BY m.into_id) stray`)
	if err != nil {
		return 0, fmt.Errorf("sweep merged groups: %w", err)
	}
	return moved, nil
}

// UnmergeErrorGroup splits the group p.From, which an operator merged
// into p.Group, off again (audited as group_unmerge): its id stops
// redirecting, and the letters of p.Group that fit its kept template
// better than p.Group's go back to it. A merge the grouper made (its
// template is gone) cannot be undone so: split the template instead.
func (s *Store) UnmergeErrorGroup(ctx context.Context, p dlq.GroupUnmergeParams) (dlq.GroupUnmergeResult, error) {
	if err := unmergeProblems(p); err != nil {
		return dlq.GroupUnmergeResult{}, err
	}
	var res dlq.GroupUnmergeResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		survivor, _, err := editableGroup(ctx, tx, p.Group)
		if err != nil {
			return err
		}
		merged, err := unmergeable(ctx, tx, p)
		if err != nil {
			return err
		}
		res = dlq.GroupUnmergeResult{Survivor: p.Group, Group: p.From, Template: templateText(merged)}
		if still, err := stillMerged(ctx, tx, p.From); err != nil || !still {
			return err // !still: split off already
		}
		moved, err := splitOff(ctx, tx, p, merged, survivor)
		if err != nil {
			return err
		}
		return auditGroupChange(ctx, tx, p.Actor, dlq.ActionGroupUnmerge, strings.TrimSpace(p.Reason),
			map[string]int64{"letters": int64(moved)},
			map[string]any{"group": p.From, "survivor": p.Group, "template": res.Template})
	})
	if err != nil {
		return dlq.GroupUnmergeResult{}, fmt.Errorf("split group %s off %s: %w", p.From, p.Group, err)
	}
	return res, nil
}

// unmergeProblems is a *dlq.ValidationError naming what is wrong with
// the request p, or nil.
func unmergeProblems(p dlq.GroupUnmergeParams) error {
	problems := map[string]string{}
	if msg := dlq.ReasonProblem(p.Reason); msg != "" {
		problems["reason"] = msg
	}
	switch {
	case dlq.IdProblem(p.From) != "":
		problems["group"] = dlq.IdProblem(p.From)
	case p.From == p.Group:
		problems["group"] = "a group cannot be split off itself: name a group merged into it"
	}
	if len(problems) > 0 {
		return &dlq.ValidationError{Fields: problems}
	}
	return nil
}

// stillMerged reports whether the group from still redirects (its merge
// is not undone yet).
func stillMerged(ctx context.Context, tx *sqlx.Tx, from string) (bool, error) {
	var into string
	switch err := postgres.Translate(tx.GetContext(ctx, &into, `SELECT into_id FROM error_group_merges WHERE from_id = $1`, from)); err {
	case dlq.ErrNotFound:
		return false, nil
	case nil:
		return true, nil
	default:
		return false, fmt.Errorf("read merges of %s: %w", from, err)
	}
}

// splitOff undoes the merge of p.From into p.Group: the letters of
// p.Group that fit merged (p.From's kept template) better than survivor
// (p.Group's) go back to p.From, which stops redirecting, and both
// groups are recounted. It returns how many letters moved.
func splitOff(ctx context.Context, tx *sqlx.Tx, p dlq.GroupUnmergeParams, merged, survivor grouping.Template) (int, error) {
	if err := lockSummaries(ctx, tx); err != nil {
		return 0, err
	}
	ids, err := lettersFitting(ctx, tx, p.Group, merged, survivor)
	if err != nil {
		return 0, err
	}
	to := make([]string, len(ids))
	for i := range to {
		to[i] = p.From
	}
	if err := moveLetters(ctx, tx, ids, to); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM error_group_merges WHERE from_id = $1`, p.From); err != nil {
		return 0, fmt.Errorf("end merge of %s: %w", p.From, err)
	}
	return len(ids), recountGroups(ctx, tx, []string{p.Group, p.From})
}

// unmergeable returns the kept template of p.From, when an operator
// merged it into p.Group, or it was split off p.Group so already (a
// repeat); otherwise why it cannot be split off.
func unmergeable(ctx context.Context, tx *sqlx.Tx, p dlq.GroupUnmergeParams) (grouping.Template, error) {
	var m struct {
		Into  string `db:"into_id"`
		Actor string `db:"actor"`
	}
	err := postgres.Translate(tx.GetContext(ctx, &m, `SELECT into_id, actor FROM error_group_merges WHERE from_id = $1`, p.From))
	switch {
	case err == dlq.ErrNotFound:
		// Split off already? Its unmerge from p.Group is in the trail.
		var done bool
		if err := tx.GetContext(ctx, &done, `SELECT EXISTS (SELECT 1 FROM audit_events
			WHERE action = $1 AND details->>'group' = $2 AND details->>'survivor' = $3)`, dlq.ActionGroupUnmerge, p.From, p.Group); err != nil {
			return grouping.Template{}, fmt.Errorf("read the audit trail: %w", err)
		}
		if !done {
			return grouping.Template{}, &dlq.ValidationError{Fields: map[string]string{"group": fmt.Sprintf("%s was not merged into this group", p.From)}}
		}
	case err != nil:
		return grouping.Template{}, fmt.Errorf("read merges of %s: %w", p.From, err)
	case m.Into != p.Group:
		return grouping.Template{}, &dlq.ValidationError{Fields: map[string]string{"group": fmt.Sprintf("%s was merged into %s, not into this group", p.From, m.Into)}}
	case m.Actor == dlq.SystemActor:
		return grouping.Template{}, &dlq.ValidationError{Fields: map[string]string{"group": fmt.Sprintf(
			"%s was merged by the grouper, which learned that the two are one failure: split this group's template by a part instead", p.From)}}
	}
	ts, err := lockTemplates(ctx, tx, []string{p.From})
	if err != nil {
		return grouping.Template{}, err
	}
	t, ok := ts[p.From]
	if !ok {
		return grouping.Template{}, &dlq.ValidationError{Fields: map[string]string{"group": fmt.Sprintf("the template of %s is not kept: it cannot be told apart again", p.From)}}
	}
	return t, nil
}

// lettersFitting returns the letters of group that belong to the restored
// template t rather than to the group's own template (own; zero when it
// has none): those t fits, unless own fits them too and says as much.
func lettersFitting(ctx context.Context, tx *sqlx.Tx, group string, t, own grouping.Template) ([]int64, error) {
	var letters []struct {
		ID      int64  `db:"id"`
		Task    string `db:"task"`
		Class   string `db:"error_class"`
		Message string `db:"error_message"`
		Hash    string `db:"tb"`
	}
	err := tx.SelectContext(ctx, &letters, `SELECT id, task, error_class, left(error_message, 1000) AS error_message,
		`+letterpack.SameTracebackSQL("d")+` AS tb FROM dead_letter_records d WHERE fingerprint = $1 AND task = $2 AND error_class = $3 ORDER BY id`,
		group, t.Task, t.Class)
	if err != nil {
		return nil, fmt.Errorf("read letters of %s: %w", group, err)
	}
	// A failure's letters share a few tracebacks: each is read once.
	first := map[string]int64{}
	for _, l := range letters {
		if _, ok := first[l.Hash]; !ok {
			first[l.Hash] = l.ID
		}
	}
	var tracebacks []struct {
		Hash string `db:"tb"`
		Text string `db:"traceback"`
	}
	ids := make([]int64, 0, len(first))
	for _, id := range first {
		ids = append(ids, id)
	}
	if err := tx.SelectContext(ctx, &tracebacks, `SELECT `+letterpack.SameTracebackSQL("d")+` AS tb, `+letterpack.TracebackSQL("d")+` AS traceback
		FROM dead_letter_records d WHERE id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("read tracebacks of %s: %w", group, err)
	}
	byHash := make(map[string]string, len(tracebacks))
	for _, tb := range tracebacks {
		byHash[tb.Hash] = tb.Text
	}
	var out []int64
	for _, l := range letters {
		gl := grouping.Letter{Task: l.Task, Class: l.Class, Message: l.Message, Traceback: byHash[l.Hash]}
		if t.Fits(gl) && !(own.ID != "" && own.Fits(gl) && constantsOf(own) >= constantsOf(t)) {
			out = append(out, l.ID)
		}
	}
	return out, nil
}

// constantsOf counts a template's words that are no variable: the more,
// the more precisely it names a failure.
func constantsOf(t grouping.Template) int {
	n := 0
	for _, tok := range t.Tokens {
		if !grouping.IsVariable(tok) {
			n++
		}
	}
	return n
}

// lockGroupEdits serialises operators' changes to groups for tx.
func lockGroupEdits(ctx context.Context, tx *sqlx.Tx) error {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, groupEditLockKey); err != nil {
		return fmt.Errorf("lock group changes: %w", err)
	}
	return nil
}

// lockSummaries makes letters being dead-lettered, replayed or discarded
// wait until tx has recounted the summaries it recounts, so that none is
// counted twice or lost (as RebuildGroups does). The locks are taken in
// the order the letters' triggers take them.
func lockSummaries(ctx context.Context, tx *sqlx.Tx) error {
	for _, q := range []string{
		// The groups a change names are no news: no "new group" event.
		`SET LOCAL redrive.regrouping = 'on'`,
		`LOCK TABLE error_groups, dead_letter_inflow IN SHARE ROW EXCLUSIVE MODE`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("lock group summaries: %w", err)
		}
	}
	return nil
}

// liveGroupRow is what a change reads of a live group.
type liveGroupRow struct {
	ID    string `db:"fingerprint"`
	Task  string `db:"task"`
	Class string `db:"error_class"`
}

// resolveGroups returns the group each id means now: itself, or the group
// it was merged into.
func resolveGroups(ctx context.Context, tx *sqlx.Tx, ids []string) (map[string]string, error) {
	var rows []struct {
		ID   string `db:"id"`
		Into string `db:"into_id"`
	}
	err := tx.SelectContext(ctx, &rows, `
		SELECT f AS id, coalesce(m.into_id, f) AS into_id
		FROM unnest($1::text[]) f LEFT JOIN error_group_merges m ON m.from_id = f`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("resolve groups: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Into
	}
	return out, nil
}

// liveGroups reads the live groups among ids.
func liveGroups(ctx context.Context, tx *sqlx.Tx, ids []string) (map[string]liveGroupRow, error) {
	var rows []liveGroupRow
	err := tx.SelectContext(ctx, &rows, `SELECT fingerprint, task, error_class FROM error_groups WHERE fingerprint = ANY($1)`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	out := make(map[string]liveGroupRow, len(rows))
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// lockTemplates reads the templates of ids, locked for tx, in id order.
func lockTemplates(ctx context.Context, tx *sqlx.Tx, ids []string) (map[string]grouping.Template, error) {
	var rows []templateRow
	err := tx.SelectContext(ctx, &rows, `SELECT `+templateColumns+` FROM error_templates
		WHERE id = ANY($1) ORDER BY id FOR UPDATE`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("read templates: %w", err)
	}
	out := make(map[string]grouping.Template, len(rows))
	for _, r := range rows {
		out[r.ID] = r.template()
	}
	return out, nil
}

// pinnedPositions returns, per group, the positions of its template an
// operator's split fixed.
func pinnedPositions(ctx context.Context, tx *sqlx.Tx, ids []string) (map[string]map[int]bool, error) {
	var rows []struct {
		ID       string `db:"id"`
		Position int    `db:"position"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT id, position FROM error_group_splits WHERE id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("read splits: %w", err)
	}
	out := map[string]map[int]bool{}
	for _, r := range rows {
		if out[r.ID] == nil {
			out[r.ID] = map[int]bool{}
		}
		out[r.ID][r.Position] = true
	}
	return out, nil
}

// updateTemplate writes an operator's change of a template: a new
// revision, which the grouper's learning on older copies cannot undo.
func updateTemplate(ctx context.Context, tx *sqlx.Tx, t grouping.Template) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO error_templates AS t (id, task, error_class, place, tokens, fixed, span, seq, rev)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1)
		ON CONFLICT (id) DO UPDATE SET tokens = EXCLUDED.tokens, fixed = EXCLUDED.fixed, span = EXCLUDED.span,
			rev = t.rev + 1, updated_at = now()`,
		t.ID, t.Task, t.Class, t.Place, pq.Array(t.Tokens), pq.Array(fixedOf(t)), t.Span, t.Seq)
	if err != nil {
		return fmt.Errorf("save template %s: %w", t.ID, err)
	}
	return nil
}

func fixedOf(t grouping.Template) []bool {
	if len(t.Fixed) == len(t.Tokens) {
		return t.Fixed
	}
	return make([]bool, len(t.Tokens))
}

// templateText is a template as one line, "" for none.
func templateText(t grouping.Template) string { return strings.Join(t.Tokens, " ") }

// moveLetters files each letter ids[i] under group to[i], in batches.
func moveLetters(ctx context.Context, tx *sqlx.Tx, ids []int64, to []string) error {
	const batch = 50_000
	for start := 0; start < len(ids); start += batch {
		end := min(start+batch, len(ids))
		for _, q := range []string{
			`UPDATE dead_letter_records d SET fingerprint = m.fp
			 FROM unnest($1::bigint[], $2::text[]) AS m(id, fp) WHERE d.id = m.id`,
			`UPDATE pending_dead_letters d SET fingerprint = m.fp
			 FROM unnest($1::bigint[], $2::text[]) AS m(id, fp) WHERE d.id = m.id`,
		} {
			if _, err := tx.ExecContext(ctx, q, pq.Array(ids[start:end]), pq.Array(to[start:end])); err != nil {
				return fmt.Errorf("move letters: %w", err)
			}
		}
	}
	return nil
}

// recountSummariesSQL rewrites the error_groups rows of the groups $1 from
// their letters, as the letters' triggers would have kept them; a group
// left without letters has none. The counts come from one pass over the
// letters and one over the narrow pending rows, and each group's sample
// (its newest message) from one step down its index: aggregating every
// message to keep one sorted a million of them to disk (8.3 s of
// regrouping a million letters into 44 groups, against 1.6 s this way).
const recountSummariesSQL = `
WITH counted AS (
	SELECT fingerprint, min(task) AS task, min(error_class) AS error_class, count(*) AS total,
		min(failed_at) AS first_seen, max(failed_at) AS last_seen
	FROM dead_letter_records WHERE fingerprint = ANY($1) GROUP BY fingerprint
), real AS (
	SELECT c.fingerprint, c.task, c.error_class, s.error_message AS sample_message, c.total,
		coalesce(p.pending, 0) AS pending, c.first_seen, c.last_seen
	FROM counted c
	LEFT JOIN (SELECT fingerprint, count(*) AS pending FROM pending_dead_letters
		WHERE fingerprint = ANY($1) GROUP BY fingerprint) p USING (fingerprint)
	CROSS JOIN LATERAL (SELECT d.error_message FROM dead_letter_records d
		WHERE d.fingerprint = c.fingerprint ORDER BY d.failed_at DESC, d.id DESC LIMIT 1) s
), gone AS (
	DELETE FROM error_groups g WHERE g.fingerprint = ANY($1)
		AND NOT EXISTS (SELECT 1 FROM real WHERE real.fingerprint = g.fingerprint)
)
INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
SELECT fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen FROM real ORDER BY fingerprint
ON CONFLICT (fingerprint) DO UPDATE SET task = EXCLUDED.task, error_class = EXCLUDED.error_class,
	sample_message = EXCLUDED.sample_message, total = EXCLUDED.total, pending = EXCLUDED.pending,
	first_seen = EXCLUDED.first_seen, last_seen = EXCLUDED.last_seen`

// recountGroupsSQL recounts the summaries of the groups $1: their rows and
// their inflow.
var recountGroupsSQL = []string{
	recountSummariesSQL,
	`DELETE FROM dead_letter_inflow WHERE fingerprint = ANY($1)`,
	`INSERT INTO dead_letter_inflow (fingerprint, hour, queue, task, n)
	 SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
	 FROM dead_letter_records WHERE fingerprint = ANY($1) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
}

// recountGroups recounts the summaries of groups from their letters;
// the caller holds them locked (lockSummaries).
func recountGroups(ctx context.Context, tx *sqlx.Tx, groups []string) error {
	for _, q := range recountGroupsSQL {
		if _, err := tx.ExecContext(ctx, q, pq.Array(groups)); err != nil {
			return fmt.Errorf("recount groups: %w", err)
		}
	}
	return nil
}
