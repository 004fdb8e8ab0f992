package handlers

import (
	"context"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// SourceLister lists the sources and their state (the store's sources
// room).
type SourceLister interface {
	Sources(ctx context.Context) ([]dlq.Source, error)
}

// AdminSources renders the sources letters come from: each one's kind,
// what it brought in and when, its letters and pending letters (linked to
// the list), and what the console can do with them.
func AdminSources(store SourceLister, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAdminister(c); err != nil {
			return err
		}
		srcs, err := store.Sources(c.Request().Context())
		if err != nil {
			return err
		}
		var v views.SourcesView
		for _, s := range srcs {
			row := views.SourceRow{Name: s.Name, Kind: string(s.Kind), Imported: s.Imported, LastImportAt: s.LastImportAt,
				Letters: s.Letters, Pending: s.Pending, CheckedAt: s.CheckedAt, LastErrorAt: s.LastErrorAt,
				LettersHref: "/dead-letters?" + url.Values{"source": {s.Name}, "status": {dlq.StatusAll}}.Encode(),
				PendingHref: "/dead-letters?" + url.Values{"source": {s.Name}}.Encode()}
			if ok, why := s.CanReplay(); !ok {
				row.NoReplay = why
			}
			if s.LastError != nil {
				row.LastError = *s.LastError
			}
			v.Sources = append(v.Sources, row)
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return Render(c, 200, views.Layout(Meta(c, "Sources", "admin", version), views.Sources(v)))
	}
}
