package handlers

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// Banners keeps what every page's banners read (the operations in flight,
// the open pauses and throttles, the next purge) for a window
// (web.BannerWindow) before reading it again: each is a round trip on
// every page. What this console changes (any request but a GET or HEAD
// that it answers) is shown at the next page; what changes elsewhere (a
// worker ending a pause whose time ran out, the CLI, another console, the
// operations runner's progress) within the window. One is made per
// server; a zero window keeps nothing, every page reads its banners.
type Banners struct {
	window time.Duration
	now    func() time.Time
	// changes counts the requests this console answered that may have
	// changed something (CountChanges): a read made before the latest one
	// is not shown again.
	changes atomic.Uint64

	inFlight  recent[dlq.InFlight]
	pauses    recent[openRows[dlq.Pause]]
	throttles recent[openRows[dlq.Throttle]]
	forecast  recent[dlq.PurgeForecast]
}

// NewBanners returns banners kept for window by the clock now.
func NewBanners(window time.Duration, now func() time.Time) *Banners {
	return &Banners{window: window, now: now}
}

// CountChanges notes every request that may change something (any method
// but GET and HEAD) once it has been answered, so that the next page reads
// its banners anew: the pause just made is in the banner of the page the
// form redirects to. It runs before the response leaves: net/http sends a
// handler's buffered answer only when it returns.
func (b *Banners) CountChanges(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := c.Request().Method
		if m == http.MethodGet || m == http.MethodHead {
			return next(c)
		}
		defer b.changes.Add(1)
		return next(c)
	}
}

// changed counts a change this console made other than by answering a
// request that CountChanges saw (a lapsed pause recorded by a page).
func (b *Banners) changed() { b.changes.Add(1) }

// openRows is what a read of the open pauses or throttles returns.
type openRows[T any] struct {
	open   []T
	lapsed bool
}

// recent is one banner's last read: its value, when it was read and the
// change count before it was read.
type recent[T any] struct {
	mu      sync.Mutex
	value   T
	key     time.Time // what the read was for (the forecast's purge time)
	read    time.Time
	changes uint64
	ok      bool
}

// get returns the value read for key less than the window ago with no
// change counted since, or reads it with read and keeps it. A failed read
// is not kept. The value is shared between requests: callers only read it.
func get[T any](ctx context.Context, b *Banners, r *recent[T], key time.Time, read func(context.Context) (T, error)) (T, error) {
	now, changes := b.now(), b.changes.Load()
	r.mu.Lock()
	if r.ok && r.changes == changes && r.key.Equal(key) && !now.Before(r.read) && now.Sub(r.read) < b.window {
		v := r.value
		r.mu.Unlock()
		return v, nil
	}
	r.mu.Unlock()
	v, err := read(ctx)
	if err != nil || b.window <= 0 {
		return v, err
	}
	r.mu.Lock()
	r.value, r.key, r.read, r.changes, r.ok = v, key, now, changes, true
	r.mu.Unlock()
	return v, nil
}

// operationsInFlight reads the banner's operations in flight.
func (b *Banners) operationsInFlight(ctx context.Context, store InFlightReader) (dlq.InFlight, error) {
	return get(ctx, b, &b.inFlight, time.Time{}, func(ctx context.Context) (dlq.InFlight, error) {
		return store.OperationsInFlight(ctx, inFlightShown)
	})
}

// openPauses reads the banner's open pauses, and whether one has lapsed.
func (b *Banners) openPauses(ctx context.Context, store PauseStore) ([]dlq.Pause, bool, error) {
	o, err := get(ctx, b, &b.pauses, time.Time{}, func(ctx context.Context) (openRows[dlq.Pause], error) {
		open, lapsed, err := store.OpenPauses(ctx)
		return openRows[dlq.Pause]{open, lapsed}, err
	})
	return o.open, o.lapsed, err
}

// openThrottles reads the banner's open throttles, and whether one has
// lapsed.
func (b *Banners) openThrottles(ctx context.Context, store ThrottleStore) ([]dlq.Throttle, bool, error) {
	o, err := get(ctx, b, &b.throttles, time.Time{}, func(ctx context.Context) (openRows[dlq.Throttle], error) {
		open, lapsed, err := store.OpenThrottles(ctx)
		return openRows[dlq.Throttle]{open, lapsed}, err
	})
	return o.open, o.lapsed, err
}

// purgeForecast reads the forecast of the purge at `at`.
func (b *Banners) purgeForecast(ctx context.Context, store RetentionStore, at time.Time, retain time.Duration, now time.Time) (dlq.PurgeForecast, error) {
	return get(ctx, b, &b.forecast, at, func(ctx context.Context) (dlq.PurgeForecast, error) {
		return store.PurgeForecast(ctx, at, retain, now)
	})
}
