package handlers

import (
	"context"
	"net/url"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// SourcePendingReader reads every source's state and pending letters from
// the kept counts (the store's sources room): cheap enough for a page that
// refreshes itself every few seconds.
type SourcePendingReader interface {
	SourcesPending(ctx context.Context) ([]dlq.Source, error)
}

// overviewSources maps the sources to the overview's panel: each one's
// pending letters (linked to the list of them), its kind and its health,
// linked to the sources page when the viewer may open it. With only
// Redrive's own queue there is nothing to tell apart, and the panel is
// left out.
func overviewSources(srcs []dlq.Source, canAdminister bool) []views.OverviewSource {
	if len(srcs) < 2 {
		return nil
	}
	out := make([]views.OverviewSource, 0, len(srcs))
	for _, s := range srcs {
		row := views.OverviewSource{Name: s.Name, Kind: string(s.Kind), Pending: s.Pending,
			PendingHref:  "/dead-letters?" + url.Values{"source": {s.Name}}.Encode(),
			LastLetterAt: s.LastImportAt, CheckedAt: s.CheckedAt}
		if s.LastError != nil && *s.LastError != "" && s.LastErrorAt != nil {
			row.Failing, row.FailingAt = *s.LastError, s.LastErrorAt
		}
		if canAdminister {
			row.HealthHref = "/admin/sources"
		}
		out = append(out, row)
	}
	return out
}
