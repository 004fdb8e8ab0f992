package queue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/redrive/redrive/dlq"
)

// allTasksSQL lists every registered task, read only when an enqueue names
// one that is not among them, to suggest the names it was likely meant as.
const allTasksSQL = `SELECT name FROM tasks ORDER BY name`

// maxSuggestions bounds the close names an unknown task's message lists.
const maxSuggestions = 5

// unknownTaskError refuses task, which no worker has registered, naming
// the registered tasks it is closest to (a typo, another module's task of
// the same name), or saying that none is close.
func unknownTaskError(ctx context.Context, q querier, task string) error {
	names, err := registeredTasks(ctx, q)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("unknown task %q: no worker has registered it", task)
	switch close := CloseNames(task, names, maxSuggestions); {
	case len(names) == 0:
		msg += "; no worker has registered any task yet"
	case len(close) > 0:
		msg += "; did you mean " + strings.Join(close, ", ") + "?"
	default:
		msg += fmt.Sprintf("; none of the %d registered tasks is close to it", len(names))
	}
	return &dlq.ValidationError{Fields: map[string]string{"task": msg}}
}

// querier is what both a *sql.Tx (enqueueByCopy's) and an sqlx handle
// can do.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// registeredTasks lists every task a worker has registered.
func registeredTasks(ctx context.Context, q querier) ([]string, error) {
	rows, err := q.QueryContext(ctx, allTasksSQL)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return names, nil
}

// CloseNames returns up to limit of names close to name, closest first:
// those within a few edits of it (a third of its length, at least two),
// and those whose last dotted part is the same ("charge" for
// "billing.charge"), case aside.
func CloseNames(name string, names []string, limit int) []string {
	type scored struct {
		name string
		d    int
	}
	var close []scored
	maxD := max(2, len(name)/3)
	name = strings.ToLower(name)
	lastPart := func(s string) string { return s[strings.LastIndex(s, ".")+1:] }
	for _, n := range names {
		lower := strings.ToLower(n)
		d := editDistance(name, lower)
		if d > maxD && lastPart(lower) != lastPart(name) {
			continue
		}
		close = append(close, scored{n, d})
	}
	slices.SortStableFunc(close, func(a, b scored) int { return a.d - b.d })
	var out []string
	for _, c := range close[:min(limit, len(close))] {
		out = append(out, c.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes
// (task names are ASCII: jobs_task_valid).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
