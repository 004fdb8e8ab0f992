package handlers_test

import (
	"context"
	"net/http"
	"testing"
)

// TestAPIEnqueueTimeout: timeout_seconds sets the job's own limit on one
// attempt, in a single enqueue and in a batch; a limit out of range is a
// 400 naming the field, and nothing is enqueued.
func TestAPIEnqueueTimeout(t *testing.T) {
	t.Parallel()
	c := apiConsole(t)
	rec := c.do(t, http.MethodPost, "/api/v1/jobs", `{"task":"t.ok","timeout_seconds":2.5}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var ms int64
	if err := c.db.QueryRowContext(context.Background(), `SELECT timeout_ms FROM jobs`).Scan(&ms); err != nil || ms != 2500 {
		t.Fatalf("timeout_ms %d (%v), want 2500", ms, err)
	}
	rec = c.do(t, http.MethodPost, "/api/v1/jobs/batch", `{"jobs":[{"task":"t.ok","timeout_seconds":1},{"task":"t.ok"}]}`)
	if rec.Code >= 300 {
		t.Fatalf("batch: %d %s", rec.Code, rec.Body)
	}
	var set, unset int
	if err := c.db.QueryRowContext(context.Background(),
		`SELECT count(*) FILTER (WHERE timeout_ms = 1000), count(*) FILTER (WHERE timeout_ms IS NULL) FROM jobs`).Scan(&set, &unset); err != nil || set != 1 || unset != 1 {
		t.Fatalf("batch timeouts: %d of 1000ms and %d unset (%v), want 1 and 1", set, unset, err)
	}
	for _, body := range []string{`{"task":"t.ok","timeout_seconds":0}`, `{"task":"t.ok","timeout_seconds":-1}`, `{"task":"t.ok","timeout_seconds":1e9}`} {
		rec := c.do(t, http.MethodPost, "/api/v1/jobs", body)
		if rec.Code != http.StatusBadRequest || decode[apiErr](t, rec.Body.String()).Error.Fields["timeout_seconds"] == "" {
			t.Errorf("%s: %d %s, want 400 naming timeout_seconds", body, rec.Code, rec.Body)
		}
	}
}
