package handlers

import (
	"context"
	"net/http"
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
			if s.ReplayURL != nil {
				if u, err := url.Parse(*s.ReplayURL); err == nil {
					row.ReplayHost = u.Host
				}
			}
			row.ReplaysWaiting = s.ReplaysWaiting
			if s.ReplayProblem != nil {
				row.ReplayProblem = *s.ReplayProblem
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

// sourceJSON is a source as the API answers it: its state, what it can do
// with its letters, and for an importing source (River) when it was last
// read to the end and what stopped its last import.
type sourceJSON struct {
	dlq.Source
	CanReplay bool   `json:"can_replay"`
	NoReplay  string `json:"no_replay,omitempty"`
}

// APISources answers GET /api/v1/sources: every source letters come from,
// Redrive's own queue first, with its counts and state.
func APISources(store SourceLister) echo.HandlerFunc {
	return func(c echo.Context) error {
		srcs, err := store.Sources(c.Request().Context())
		if err != nil {
			return err
		}
		out := struct {
			Sources []sourceJSON `json:"sources"`
		}{Sources: make([]sourceJSON, 0, len(srcs))}
		for _, s := range srcs {
			ok, why := s.CanReplay()
			out.Sources = append(out.Sources, sourceJSON{Source: s, CanReplay: ok, NoReplay: why})
		}
		return c.JSON(http.StatusOK, out)
	}
}
