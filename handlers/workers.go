package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// WorkerLister lists worker processes with the age of their heartbeats.
type WorkerLister interface {
	WorkerStatuses(ctx context.Context) ([]dlq.WorkerStatus, error)
}

// Workers renders the live worker processes, stale ones flagged.
func Workers(store WorkerLister, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ws, err := store.WorkerStatuses(c.Request().Context())
		if err != nil {
			return err
		}
		page := views.WorkersPage{StaleAfter: spanText(dlq.WorkerStaleAfter), ForgetAfter: spanText(dlq.WorkerForgetAfter)}
		for _, w := range ws {
			page.Workers = append(page.Workers, views.WorkerRow{
				ID:           w.ID,
				Host:         w.Host,
				PID:          w.PID,
				Version:      w.Version,
				Queues:       w.Queues,
				Tasks:        w.Tasks,
				Concurrency:  w.Concurrency,
				InFlight:     w.InFlight,
				Started:      w.StartedAt,
				Heartbeat:    w.HeartbeatAt,
				HeartbeatAge: spanText(w.HeartbeatAge) + " ago",
				Stale:        w.Stale(),
			})
			if w.Stale() {
				page.Stale++
			} else {
				page.Live++
			}
		}
		return Render(c, http.StatusOK, views.Layout(Meta(c, "Workers", "workers", version), views.Workers(page)))
	}
}

// spanText writes d the way a person says it: "40 s", "3 min",
// "2 h 5 min", "3 d". Negative durations read as their size.
func spanText(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	default:
		return fmt.Sprintf("%d d", int(d/(24*time.Hour)))
	}
}
