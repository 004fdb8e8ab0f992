package handlers_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/storetest"
)

// failingAfter reads the real store but fails once n letters have gone out,
// as a page query that times out or loses its connection would.
type failingAfter struct {
	*letters.Store
	n int
}

func (s failingAfter) EachDeadLetter(ctx context.Context, f dlq.Filter, fn func(dlq.DeadLetter) error) error {
	sent := 0
	return s.Store.EachDeadLetter(ctx, f, func(d dlq.DeadLetter) error {
		if sent == s.n {
			return errors.New("read page: connection reset by peer")
		}
		sent++
		return fn(d)
	})
}

// An export that fails part way must not pass for a complete file: the
// client's read fails instead of ending cleanly on a row boundary.
func TestExportFailingPartWayIsNotTakenForComplete(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	if _, err := db.Exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
		attempts, max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT g, 'default', 't.ok', '[]', '{}', 'E', 'boom', 1, 1, 'permanent', 'fp', now(), now() - g * interval '1 second'
		FROM generate_series(1, 2500) g`); err != nil {
		t.Fatal(err)
	}
	store := storetest.NewStores(db.DB)
	serve := func(exporter handlers.DeadLetterExporter) string {
		e := echo.New()
		e.Use(middleware.Recover())
		e.GET("/export.csv", handlers.ExportDeadLetters(exporter, slog.New(slog.DiscardHandler), time.Now, handlers.ExportCSV))
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		return srv.URL + "/export.csv?status=all"
	}

	res, err := http.Get(serve(store.Letters))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || strings.Count(string(body), "\n") != 2501 {
		t.Fatalf("a whole export: %d lines, read error %v", strings.Count(string(body), "\n"), err)
	}

	res, err = http.Get(serve(failingAfter{Store: store.Letters, n: 1200}))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: the header was out before the failure", res.StatusCode)
	}
	if _, err := io.ReadAll(res.Body); err == nil {
		t.Fatal("the cut-off export read as complete")
	}
}
