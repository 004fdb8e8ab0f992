package groups

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/postgres"
)

// Bounds of the incident read.
const (
	// liveWithin: a group is live while it has pending letters or has
	// had a letter this recently. Pending is what a replay would act on;
	// the hour keeps an outage whose letters were all replayed too early
	// (and are dying again) in view.
	liveWithin = time.Hour
	// maxLiveGroups bounds the groups compared, the most recently seen
	// first: the comparison is quadratic within an error class.
	maxLiveGroups = 1000
	// MaxIncidents bounds the incidents one read returns, the most pending
	// first.
	MaxIncidents = 50
	// MaxIncidentGroups bounds the groups of one incident, the oldest
	// kept, so that one filter (MaxFilterGroups) replays it all and its id
	// does not change as new groups join.
	MaxIncidentGroups = dlq.MaxFilterGroups
)

// liveGroupsSQL reads the live groups with their templates. The planner
// walks error_groups_last_seen_idx newest first, filtering, until it has
// the limit (the groups of the last hour come first); each template is one
// primary-key probe. With 23,600 groups (3,600 live) it reads 1,000 in
// 5 ms (EXPLAIN ANALYZE), and Incidents takes 17 ms in all. A group merged
// away but not yet swept (its letters on their way to the survivor) is
// left out. The sample message is only read for a group without a kept
// template, which is compared by it instead.
const liveGroupsSQL = `
SELECT g.fingerprint, g.task, g.error_class, g.pending, g.first_seen,
	t.id IS NOT NULL AS has_template,
	CASE WHEN t.id IS NULL THEN g.sample_message ELSE '' END AS sample_message,
	coalesce(t.tokens, '{}') AS tokens, coalesce(t.fixed, '{}') AS fixed, coalesce(t.span, false) AS span
FROM error_groups g
LEFT JOIN error_templates t ON t.id = g.fingerprint
WHERE (g.pending > 0 OR g.last_seen > now() - $2 * interval '1 second')
	AND NOT EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = g.fingerprint)
ORDER BY g.last_seen DESC, g.fingerprint
LIMIT $1`

// liveGroup is a live group as the incident read compares it.
type liveGroup struct {
	Fingerprint   string         `db:"fingerprint"`
	Task          string         `db:"task"`
	ErrorClass    string         `db:"error_class"`
	Pending       int64          `db:"pending"`
	FirstSeen     time.Time      `db:"first_seen"`
	HasTemplate   bool           `db:"has_template"`
	SampleMessage string         `db:"sample_message"`
	Tokens        pq.StringArray `db:"tokens"`
	Fixed         pq.BoolArray   `db:"fixed"`
	Span          bool           `db:"span"`
}

// template is the group's kept template, or the one its sample message
// would start, when none is kept.
func (g liveGroup) template() grouping.Template {
	if !g.HasTemplate || len(g.Tokens) == 0 {
		return grouping.MessageTemplate(g.Task, g.ErrorClass, g.SampleMessage)
	}
	return grouping.Template{ID: g.Fingerprint, Task: g.Task, Class: g.ErrorClass,
		Tokens: []string(g.Tokens), Fixed: []bool(g.Fixed), Span: g.Span}
}

// incidentGroupsSQL reads the groups of incidents as the group pages do:
// their last hour counted, their sample's arguments found for masking.
const incidentGroupsSQL = `SELECT g.*, sample.* FROM (SELECT ` + GroupColumns + ` FROM error_groups
	WHERE fingerprint = ANY($1)) g` + GroupSampleJoin

// Incidents returns the live incidents, the most pending first, at most
// MaxIncidents, read at one snapshot.
func (s *Store) Incidents(ctx context.Context) ([]dlq.Incident, error) {
	var out []dlq.Incident
	err := postgres.ReadOnly(ctx, s.db, func(tx *sqlx.Tx) error {
		clusters, err := incidentClusters(ctx, tx)
		if err != nil {
			return err
		}
		out, err = readIncidents(ctx, tx, clusters[:min(len(clusters), MaxIncidents)])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("incidents: %w", err)
	}
	return out, nil
}

// IncidentOf returns the incident the group id is in, as its id or as one
// of its groups, following a merge to the group id now means; ok is false
// when the group is in no incident (or is no group).
func (s *Store) IncidentOf(ctx context.Context, id string) (inc dlq.Incident, ok bool, err error) {
	err = postgres.ReadOnly(ctx, s.db, func(tx *sqlx.Tx) error {
		var into string
		switch err := tx.GetContext(ctx, &into, `SELECT into_id FROM error_group_merges WHERE from_id = $1`, id); postgres.Translate(err) {
		case nil:
			id = into
		case dlq.ErrNotFound:
		default:
			return fmt.Errorf("read merges of group %s: %w", id, err)
		}
		clusters, err := incidentClusters(ctx, tx)
		if err != nil {
			return err
		}
		for _, c := range clusters {
			if !slices.ContainsFunc(c, func(g liveGroup) bool { return g.Fingerprint == id }) {
				continue
			}
			incs, err := readIncidents(ctx, tx, [][]liveGroup{c})
			if err != nil || len(incs) == 0 {
				return err
			}
			inc, ok = incs[0], true
			return nil
		}
		return nil
	})
	if err != nil {
		return dlq.Incident{}, false, fmt.Errorf("incident of group %s: %w", id, err)
	}
	return inc, ok, nil
}

// incidentClusters reads the live groups and returns their incidents as
// sets of groups, each oldest first, the most pending first.
func incidentClusters(ctx context.Context, tx *sqlx.Tx) ([][]liveGroup, error) {
	var live []liveGroup
	if err := tx.SelectContext(ctx, &live, liveGroupsSQL, maxLiveGroups, liveWithin.Seconds()); err != nil {
		return nil, fmt.Errorf("read live groups: %w", postgres.Translate(err))
	}
	clusters := clusterIncidents(live)
	slices.SortStableFunc(clusters, func(a, b []liveGroup) int {
		return cmp.Or(cmp.Compare(pendingOf(b), pendingOf(a)), strings.Compare(a[0].Fingerprint, b[0].Fingerprint))
	})
	return clusters, nil
}

func pendingOf(gs []liveGroup) int64 {
	var n int64
	for _, g := range gs {
		n += g.Pending
	}
	return n
}

// clusterIncidents links each two groups of different tasks that are the
// same failure (grouping.SameFailure) and returns the connected sets that
// span two tasks or more, each oldest first and cut to MaxIncidentGroups.
// Only groups of one error class are compared, and two groups of one task
// are never linked directly: they are two failures to the grouper, and
// only another task's same failure makes them part of one incident.
func clusterIncidents(live []liveGroup) [][]liveGroup {
	parent := make([]int, len(live))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	templates := make([]grouping.Template, len(live))
	byClass := map[string][]int{}
	for i, g := range live {
		templates[i] = g.template()
		byClass[g.ErrorClass] = append(byClass[g.ErrorClass], i)
	}
	for _, members := range byClass {
		for x, i := range members {
			for _, j := range members[x+1:] {
				if live[i].Task == live[j].Task || find(i) == find(j) {
					continue
				}
				if grouping.SameFailure(templates[i], templates[j]) {
					parent[find(i)] = find(j)
				}
			}
		}
	}
	sets := map[int][]liveGroup{}
	for i := range live {
		r := find(i)
		sets[r] = append(sets[r], live[i])
	}
	var out [][]liveGroup
	for _, set := range sets {
		if len(set) < 2 {
			continue
		}
		slices.SortFunc(set, func(a, b liveGroup) int {
			return cmp.Or(a.FirstSeen.Compare(b.FirstSeen), strings.Compare(a.Fingerprint, b.Fingerprint))
		})
		set = set[:min(len(set), MaxIncidentGroups)]
		if tasksOf(set) >= 2 {
			out = append(out, set)
		}
	}
	return out
}

func tasksOf(gs []liveGroup) int {
	seen := map[string]bool{}
	for _, g := range gs {
		seen[g.Task] = true
	}
	return len(seen)
}

// readIncidents reads the groups of clusters in one query and makes each
// cluster an incident. A group gone since the clusters were read (a
// purge) is left out, and an incident left with one task is dropped.
func readIncidents(ctx context.Context, tx *sqlx.Tx, clusters [][]liveGroup) ([]dlq.Incident, error) {
	var ids []string
	for _, c := range clusters {
		for _, g := range c {
			ids = append(ids, g.Fingerprint)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var groups []dlq.ErrorGroup
	if err := tx.SelectContext(ctx, &groups, incidentGroupsSQL, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("read incident groups: %w", postgres.Translate(err))
	}
	byID := make(map[string]dlq.ErrorGroup, len(groups))
	for _, g := range groups {
		byID[g.Fingerprint] = g
	}
	var out []dlq.Incident
	for _, c := range clusters {
		if inc, ok := incidentOf(c, byID); ok {
			out = append(out, inc)
		}
	}
	slices.SortStableFunc(out, func(a, b dlq.Incident) int {
		return cmp.Or(cmp.Compare(b.Pending, a.Pending), b.LastSeen.Compare(a.LastSeen), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// incidentOf makes an incident of a cluster (oldest first) from its
// groups as read.
func incidentOf(c []liveGroup, byID map[string]dlq.ErrorGroup) (dlq.Incident, bool) {
	var inc dlq.Incident
	var shared grouping.Template
	tasks := map[string]bool{}
	for _, lg := range c {
		g, ok := byID[lg.Fingerprint]
		if !ok {
			continue
		}
		t := lg.template()
		if len(inc.Groups) == 0 {
			inc.ID, inc.ErrorClass, inc.FirstSeen, shared = g.Fingerprint, g.ErrorClass, g.FirstSeen, t
		} else if grouping.SameFailure(shared, t) {
			shared = grouping.Template{Class: shared.Class, Tokens: grouping.Covering(shared, t), Span: shared.Span || t.Span}
		}
		tasks[g.Task] = true
		inc.Groups = append(inc.Groups, g)
		inc.Pending += g.Pending
		inc.Total += g.Total
		inc.LastHour += g.LastHour
		if g.FirstSeen.Before(inc.FirstSeen) {
			inc.FirstSeen = g.FirstSeen
		}
		if g.LastSeen.After(inc.LastSeen) {
			inc.LastSeen = g.LastSeen
		}
	}
	if len(tasks) < 2 {
		return dlq.Incident{}, false
	}
	inc.Template = grouping.Text(shared.Tokens)
	slices.SortStableFunc(inc.Groups, func(a, b dlq.ErrorGroup) int {
		return cmp.Or(cmp.Compare(b.Pending, a.Pending), strings.Compare(a.Task, b.Task), strings.Compare(a.Fingerprint, b.Fingerprint))
	})
	return inc, true
}
