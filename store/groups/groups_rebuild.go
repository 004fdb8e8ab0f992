package groups

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
)

// regrouped is what a regrouping learned of the stored letters: for the
// i-th letter its id, its old group and its new one.
type regrouped struct {
	ids   []int64
	old   []string
	group []string
}

// RebuildGroups regroups every stored letter with a new grouping.Grouper,
// learning from the letters in the order they failed, as the worker would
// have: `redrive groups rebuild`. Group ids survive where they can: each
// new group keeps the id of the old group that gave it most letters, and
// an old id that is gone redirects to the group that took most of its
// letters. An operator's choices stand: the regrouping starts from the
// templates an operator merged or split (their ids kept), and the letters
// of a group an operator merged into another stay with the survivor.
// Letters, summaries, templates and merges are written in one transaction
// that holds off writers of letters and summaries meanwhile (workers and
// actions wait, nothing is lost; letters dead-lettered after the read
// follow their old id), and the regrouping is audited as a system action.
func (s *Store) RebuildGroups(ctx context.Context) (dlq.RebuildResult, error) {
	chosen, err := s.operatorChoices(ctx)
	if err != nil {
		return dlq.RebuildResult{}, err
	}
	g := grouping.New(nil)
	g.Adopt(chosen.templates)
	r, err := s.regroup(ctx, g)
	if err != nil {
		return dlq.RebuildResult{}, err
	}
	r.group = g.Resolve(r.group)
	pinned := map[string]bool{}
	for _, t := range chosen.templates {
		pinned[t.ID] = true
	}
	names, redirects := nameGroups(r.old, r.group, pinned)
	res := dlq.RebuildResult{Letters: int64(len(r.ids)), Merged: len(redirects)}
	var moveIDs []int64
	var moveTo []string
	live := map[string]bool{}
	for i, id := range r.ids {
		to := names[r.group[i]]
		if into, ok := chosen.merges[to]; ok {
			to = into
		}
		live[to] = true
		if to != r.old[i] {
			moveIDs, moveTo = append(moveIDs, id), append(moveTo, to)
		}
	}
	res.Groups = len(live)
	res.Moved = int64(len(moveIDs))
	templates := g.Templates()
	for i := range templates {
		templates[i].ID = names[templates[i].ID]
	}
	var readUpTo int64
	if len(r.ids) > 0 {
		readUpTo = r.ids[len(r.ids)-1]
	}
	err = postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		return writeRebuild(ctx, tx, rebuildPlan{moveIDs: moveIDs, moveTo: moveTo, live: live, templates: templates,
			redirects: redirects, readUpTo: readUpTo}, &res)
	})
	if err != nil {
		return dlq.RebuildResult{}, fmt.Errorf("regroup: %w", err)
	}
	return res, nil
}

// regroup reads every letter in the order they failed and groups each as
// it arrives: one pass over the table, the database sending while g
// learns, and no letter's text kept once it is grouped (a million letters
// carry about a gigabyte of tracebacks).
func (s *Store) regroup(ctx context.Context, g *grouping.Grouper) (regrouped, error) {
	// A packed traceback comes with its template's hash and the whole
	// message, and is put together here from templates read once each
	// (letterTemplates): joined in the query, every letter's template was
	// sent with it, and the read of a million took 5.7 s against 2.3.
	rows, err := s.db.QueryContext(ctx, `
		SELECT id, task, error_class, left(error_message, 1000), fingerprint, traceback,
			traceback_template, CASE WHEN traceback_template IS NOT NULL THEN error_message END
		FROM dead_letter_records ORDER BY id`)
	if err != nil {
		return regrouped{}, fmt.Errorf("regroup: read letters: %w", err)
	}
	defer rows.Close()
	var r regrouped
	// Old ids repeat (a group's letters share one): keep one copy of each.
	interned := map[string]string{}
	templates := letterTemplates{db: s.db, byHash: map[string]string{}}
	for rows.Next() {
		var id int64
		var l grouping.Letter
		var old string
		var hash []byte
		var message sql.NullString
		if err := rows.Scan(&id, &l.Task, &l.Class, &l.Message, &old, &l.Traceback, &hash, &message); err != nil {
			return regrouped{}, fmt.Errorf("regroup: read letters: %w", err)
		}
		if hash != nil {
			template, err := templates.get(ctx, hash)
			if err != nil {
				return regrouped{}, fmt.Errorf("regroup letter %d: %w", id, err)
			}
			l.Traceback = letterpack.Unpack(template, l.Traceback, message.String)
		}
		group, err := g.Group(ctx, l)
		if err != nil {
			return regrouped{}, fmt.Errorf("regroup letter %d: %w", id, err)
		}
		if o, ok := interned[old]; ok {
			old = o
		} else {
			interned[old] = old
		}
		r.ids, r.old, r.group = append(r.ids, id), append(r.old, old), append(r.group, group)
	}
	if err := rows.Err(); err != nil {
		return regrouped{}, fmt.Errorf("regroup: read letters: %w", err)
	}
	return r, nil
}

// letterTemplates reads traceback templates by hash, each once: the
// letters of a failure share one, so a regrouping of a million letters
// reads a few hundred.
type letterTemplates struct {
	db     *sqlx.DB
	byHash map[string]string
}

func (t letterTemplates) get(ctx context.Context, hash []byte) (string, error) {
	if template, ok := t.byHash[string(hash)]; ok {
		return template, nil
	}
	var template string
	if err := t.db.GetContext(ctx, &template, `SELECT template FROM traceback_templates WHERE hash = decode($1, 'hex')`,
		hex.EncodeToString(hash)); err != nil {
		return "", fmt.Errorf("read traceback template %x: %w", hash, err)
	}
	t.byHash[string(hash)] = template
	return template, nil
}

// nameGroups gives each new group (groups[i] is the new group of the
// letter whose old group is old[i]) its final id: the old id that gave it
// most letters, unless a bigger share of that old group went to another
// new group, else its own. It returns the names and the redirects of old
// ids no group kept: each to the group that took most of its letters.
func nameGroups(old, groups []string, pinned map[string]bool) (map[string]string, map[string]string) {
	shares := sharesOf(old, groups)
	names := map[string]string{}
	taken := map[string]bool{}
	// An operator's groups keep their ids, whatever their letters were
	// filed under before.
	for id := range pinned {
		names[id], taken[id] = id, true
	}
	for _, sh := range shares {
		if _, named := names[sh.group]; !named && !taken[sh.old] && sh.old != "" {
			names[sh.group], taken[sh.old] = sh.old, true
		}
	}
	for _, id := range groups {
		if _, named := names[id]; !named {
			own := unsharedID(id, taken)
			names[id], taken[own] = own, true
		}
	}
	return names, redirectsOf(shares, names, taken)
}

// groupShare is how many letters of the old group old went to the new
// group group.
type groupShare struct {
	group, old string
	letters    int
}

// sharesOf counts the letters each new group took from each old one
// (groups[i] is the new group of the letter whose old group is old[i]),
// biggest share first, then by group and old id.
func sharesOf(old, groups []string) []groupShare {
	type pair struct{ group, old string }
	counts := map[pair]int{}
	for i, o := range old {
		counts[pair{groups[i], o}]++
	}
	shares := make([]groupShare, 0, len(counts))
	for p, n := range counts {
		shares = append(shares, groupShare{group: p.group, old: p.old, letters: n})
	}
	slices.SortFunc(shares, func(a, b groupShare) int {
		return cmp.Or(cmp.Compare(b.letters, a.letters), cmp.Compare(a.group, b.group), cmp.Compare(a.old, b.old))
	})
	return shares
}

// unsharedID is a new group's own id, unless an old group's id it happens
// to share went to another new group (taken): then a fresh one.
func unsharedID(id string, taken map[string]bool) string {
	own := id
	for n := 1; taken[own]; n++ {
		sum := sha256.Sum256([]byte(id + "/" + strconv.Itoa(n)))
		own = hex.EncodeToString(sum[:8])
	}
	return own
}

// redirectsOf sends each old id no group kept (not taken) to the group
// that took most of its letters.
func redirectsOf(shares []groupShare, names map[string]string, taken map[string]bool) map[string]string {
	redirects := map[string]string{}
	for _, sh := range shares {
		if _, done := redirects[sh.old]; !done && !taken[sh.old] && sh.old != "" {
			redirects[sh.old] = names[sh.group]
		}
	}
	return redirects
}

// operatorChoices is what an operator decided about groups, which a
// regrouping honours: the templates an operator changed (merged wider,
// split, or kept when their group was merged into another) and where each
// group an operator merged went.
type operatorChoices struct {
	templates []grouping.Template
	merges    map[string]string
}

func (s *Store) operatorChoices(ctx context.Context) (operatorChoices, error) {
	var rows []templateRow
	err := s.db.SelectContext(ctx, &rows, `SELECT `+templateColumns+` FROM error_templates
		WHERE rev > 0 OR id IN (SELECT from_id FROM error_group_merges WHERE actor <> $1) ORDER BY seq`, dlq.SystemActor)
	if err != nil {
		return operatorChoices{}, fmt.Errorf("regroup: read the operators' templates: %w", err)
	}
	c := operatorChoices{merges: map[string]string{}}
	for _, r := range rows {
		c.templates = append(c.templates, r.template())
	}
	var merges []struct {
		From string `db:"from_id"`
		Into string `db:"into_id"`
	}
	if err := s.db.SelectContext(ctx, &merges, `SELECT from_id, into_id FROM error_group_merges WHERE actor <> $1`, dlq.SystemActor); err != nil {
		return operatorChoices{}, fmt.Errorf("regroup: read the operators' merges: %w", err)
	}
	for _, m := range merges {
		c.merges[m.From] = m.Into
	}
	return c, nil
}

// rebuildPlan is what a regrouping writes: letter moveIDs[i] moves to
// group moveTo[i]; live is every group the letters read are in after;
// the templates and the redirects of old ids no group kept; and the last
// letter id it read.
type rebuildPlan struct {
	moveIDs   []int64
	moveTo    []string
	live      map[string]bool
	templates []grouping.Template
	redirects map[string]string
	readUpTo  int64
}

// writeRebuild writes a regrouping in tx: the letters that move, the
// summaries recounted for every live group, the templates and the merges.
func writeRebuild(ctx context.Context, tx *sqlx.Tx, p rebuildPlan, res *dlq.RebuildResult) error {
	// Writers of letters, of their pending rows and of the summaries wait
	// until the regrouping commits, so no summary is counted twice or lost.
	// All four tables are locked at once, before any row: a discard that
	// had locked a pending row the regrouping moves, and then waited for
	// the summaries, deadlocked with it.
	for _, q := range []string{
		`SET LOCAL redrive.regrouping = 'on'`,
		// The hourly inflow is rewritten whole below, and its daily and
		// total rollups recounted from it after, not kept by its triggers
		// as deltas (00101_letters.sql says why).
		`SET LOCAL redrive.inflow_rollup = 'off'`,
		`LOCK TABLE dead_letter_records, pending_dead_letters, error_groups, dead_letter_inflow IN SHARE ROW EXCLUSIVE MODE`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	if err := moveLetters(ctx, tx, p.moveIDs, p.moveTo); err != nil {
		return err
	}
	// In the order of the merges' key (a million in a map's order took
	// 15.9 s against 9.6).
	from := slices.Sorted(maps.Keys(p.redirects))
	into := make([]string, len(from))
	for i, f := range from {
		into[i] = p.redirects[f]
	}
	// Letters dead-lettered after the letters were read, under an old id
	// (a worker's id resolves through the redirects, not yet written),
	// follow it; and every group of those letters is recounted.
	if len(from) > 0 {
		var followed int64
		if err := tx.GetContext(ctx, &followed, followStragglersSQL, pq.Array(from), pq.Array(into), p.readUpTo); err != nil {
			return fmt.Errorf("move letters: %w", err)
		}
		res.Moved += followed
	}
	var fresh []string
	if err := tx.SelectContext(ctx, &fresh, `SELECT DISTINCT fingerprint FROM dead_letter_records WHERE id > $1`, p.readUpTo); err != nil {
		return fmt.Errorf("recount summaries: %w", err)
	}
	for _, g := range fresh {
		p.live[g] = true
	}
	live := slices.Sorted(maps.Keys(p.live))
	if _, err := tx.ExecContext(ctx, `DELETE FROM error_groups`); err != nil {
		return fmt.Errorf("recount summaries: %w", err)
	}
	if _, err := tx.ExecContext(ctx, recountSummariesSQL, pq.Array(live)); err != nil {
		return fmt.Errorf("recount summaries: %w", err)
	}
	for _, q := range []string{
		`DELETE FROM dead_letter_inflow`,
		`INSERT INTO dead_letter_inflow (fingerprint, hour, queue, task, n)
		 SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
		 FROM dead_letter_records GROUP BY 1, 2, 3`,
		`DELETE FROM dead_letter_inflow_daily`,
		`INSERT INTO dead_letter_inflow_daily (fingerprint, day, n)
		 SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date, sum(n) FROM dead_letter_inflow GROUP BY 1, 2`,
		`DELETE FROM dead_letter_inflow_totals`,
		`INSERT INTO dead_letter_inflow_totals (hour, n) SELECT hour, sum(n) FROM dead_letter_inflow GROUP BY 1`,
		`DELETE FROM notification_spikes WHERE fingerprint NOT IN (SELECT fingerprint FROM error_groups)`,
		`DELETE FROM error_templates`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("recount summaries: %w", err)
		}
	}
	if err := saveTemplates(ctx, tx, p.templates); err != nil {
		return err
	}
	// A live group is never a redirect; old redirects follow their target
	// to where it went.
	if _, err := tx.ExecContext(ctx, `DELETE FROM error_group_merges WHERE from_id IN (SELECT fingerprint FROM error_groups)`); err != nil {
		return fmt.Errorf("record merges: %w", err)
	}
	for _, q := range []string{
		`UPDATE error_group_merges m SET into_id = r.into_id
		 FROM unnest($1::text[], $2::text[]) AS r(from_id, into_id) WHERE m.into_id = r.from_id`,
		`INSERT INTO error_group_merges (from_id, into_id, actor)
		 SELECT from_id, into_id, 'system' FROM unnest($1::text[], $2::text[]) AS r(from_id, into_id)
		 ON CONFLICT (from_id) DO UPDATE SET into_id = EXCLUDED.into_id, actor = EXCLUDED.actor, merged_at = now()`,
	} {
		if _, err := tx.ExecContext(ctx, q, pq.Array(from), pq.Array(into)); err != nil {
			return fmt.Errorf("record merges: %w", err)
		}
	}
	counts, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	_, err = audit.AppendAudit(ctx, tx, dlq.AuditEntry{At: time.Now(), Actor: dlq.SystemActor, Action: dlq.ActionGroupsRebuild,
		Reason: "every letter regrouped by the learned fingerprinter", Counts: counts, Details: json.RawMessage(`{}`)})
	return err
}

// followStragglersSQL moves the letters after id $3 that are filed under
// an old id $1[i] to where it now leads, $2[i]: the letters came in after
// the regrouping read them.
const followStragglersSQL = `
WITH moved AS (
	UPDATE dead_letter_records d SET fingerprint = r.into_id
	FROM unnest($1::text[], $2::text[]) AS r(from_id, into_id)
	WHERE d.id > $3 AND d.fingerprint = r.from_id
	RETURNING d.id, d.fingerprint
), pending AS (
	UPDATE pending_dead_letters p SET fingerprint = m.fingerprint FROM moved m WHERE p.id = m.id
)
SELECT count(*) FROM moved`
