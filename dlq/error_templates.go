package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/grouping"
)

// The audit actions of group changes.
const (
	ActionGroupMerge    = "group_merge"
	ActionGroupsRebuild = "groups_rebuild"
)

// SystemActor is the actor of what Redrive does by itself: a merge of two
// groups its grouper learned to be one.
const SystemActor = "system"

// templateStore keeps a grouping.Grouper's learning in error_templates and
// error_group_merges (migration 00041).
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
}

func (r templateRow) template() grouping.Template {
	return grouping.Template{ID: r.ID, Task: r.Task, Class: r.Class, Place: r.Place,
		Tokens: []string(r.Tokens), Fixed: []bool(r.Fixed), Span: r.Span, Seq: r.Seq}
}

// Templates returns the live templates of one key.
func (t templateStore) Templates(ctx context.Context, task, class, place string) ([]grouping.Template, error) {
	var rows []templateRow
	err := t.s.db.SelectContext(ctx, &rows, `
		SELECT id, task, error_class, place, tokens, fixed, span, seq FROM error_templates
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
// transaction.
func (t templateStore) Learned(ctx context.Context, tpl grouping.Template, merged []string) error {
	return t.s.inTx(ctx, func(tx *sqlx.Tx) error {
		if err := saveTemplates(ctx, tx, []grouping.Template{tpl}); err != nil {
			return err
		}
		if len(merged) == 0 {
			return nil
		}
		return mergeGroups(ctx, tx, merged, tpl.ID, Actor{Name: SystemActor}, "the grouper learned that these groups are one failure")
	})
}

const saveTemplatesSQL = `
INSERT INTO error_templates AS t (id, task, error_class, place, tokens, fixed, span, seq)
SELECT x.id, x.task, x.error_class, x.place, string_to_array(x.tokens, E'\x1f'),
	string_to_array(x.fixed, ',')::boolean[], x.span, x.seq
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::boolean[], $8::bigint[])
	AS x(id, task, error_class, place, tokens, fixed, span, seq)
ON CONFLICT (id) DO UPDATE SET tokens = EXCLUDED.tokens, fixed = EXCLUDED.fixed, span = EXCLUDED.span, updated_at = now()
WHERE (t.tokens, t.fixed, t.span) IS DISTINCT FROM (EXCLUDED.tokens, EXCLUDED.fixed, EXCLUDED.span)`

// saveTemplates upserts templates in one statement. Tokens travel joined
// by the unit separator, which tokenize never keeps in a token.
func saveTemplates(ctx context.Context, tx *sqlx.Tx, ts []grouping.Template) error {
	n := len(ts)
	ids, tasks, classes, places := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	tokens, fixed, spans, seqs := make([]string, n), make([]string, n), make([]bool, n), make([]int64, n)
	for i, t := range ts {
		ids[i], tasks[i], classes[i], places[i], spans[i], seqs[i] = t.ID, t.Task, t.Class, t.Place, t.Span, t.Seq
		tokens[i] = strings.Join(t.Tokens, "\x1f")
		fixed[i] = joinBools(t.Fixed, len(t.Tokens))
	}
	_, err := tx.ExecContext(ctx, saveTemplatesSQL, pq.Array(ids), pq.Array(tasks), pq.Array(classes),
		pq.Array(places), pq.Array(tokens), pq.Array(fixed), pq.Array(spans), pq.Array(seqs))
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
// records the merge (from then on their ids redirect) and audits it.
func mergeGroups(ctx context.Context, tx *sqlx.Tx, from []string, into string, actor Actor, reason string) error {
	var moved int64
	if err := tx.GetContext(ctx, &moved, `SELECT error_group_move($1, $2, $3)`, pq.Array(from), into, actor.Name); err != nil {
		return fmt.Errorf("merge groups into %s: %w", into, err)
	}
	details, err := json.Marshal(map[string]any{"from": from, "into": into})
	if err != nil {
		return fmt.Errorf("merge groups: %w", err)
	}
	counts, err := json.Marshal(map[string]int64{"letters": moved})
	if err != nil {
		return fmt.Errorf("merge groups: %w", err)
	}
	_, err = appendAudit(ctx, tx, AuditEntry{At: time.Now(), Actor: actor.Name, Action: ActionGroupMerge,
		Reason: reason, RequestID: actor.RequestID, RemoteAddr: actor.RemoteAddr, UserAgent: actor.UserAgent,
		Counts: counts, Details: details})
	return err
}

// GroupSurvivor returns the live group a group id means: the id itself, or
// the group it was merged into.
func (s *Store) GroupSurvivor(ctx context.Context, id string) (string, bool, error) {
	var into string
	err := s.db.GetContext(ctx, &into, `SELECT into_id FROM error_group_merges WHERE from_id = $1`, id)
	switch translate(err) {
	case nil:
		return into, true, nil
	case ErrNotFound:
		return id, false, nil
	default:
		return "", false, fmt.Errorf("read merges of group %s: %w", id, err)
	}
}

// GroupTemplate returns a group's learned template, Wildcard where its
// letters differ, or ErrNotFound.
func (s *Store) GroupTemplate(ctx context.Context, id string) (grouping.Template, error) {
	var r templateRow
	err := s.db.GetContext(ctx, &r, `SELECT id, task, error_class, place, tokens, fixed, span, seq FROM error_templates WHERE id = $1`, id)
	if err != nil {
		return grouping.Template{}, fmt.Errorf("read template of group %s: %w", id, translate(err))
	}
	return r.template(), nil
}

// MergeGroups merges the groups from into the group into, as an operator's
// choice (audited): their letters move, their ids redirect.
func (s *Store) MergeGroups(ctx context.Context, from []string, into string, actor Actor, reason string) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		return mergeGroups(ctx, tx, from, into, actor, reason)
	})
}

// groupOf returns the error group of a new letter, learning from it.
func (s *Store) groupOf(ctx context.Context, task, class, message, traceback string) (string, error) {
	return s.groups.Group(ctx, grouping.Letter{Task: task, Class: class, Message: message, Traceback: traceback})
}

// GroupLetter assigns a letter to its error group as dead-lettering does,
// learning from it: for bulk loads (the seed) that write letters
// themselves.
func (s *Store) GroupLetter(ctx context.Context, l grouping.Letter) (string, error) {
	return s.groups.Group(ctx, l)
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
