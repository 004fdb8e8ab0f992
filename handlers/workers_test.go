package handlers_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestWorkers(t *testing.T) {
	t.Parallel()

	t.Run("StaleWorkerIsFlaggedByWordAndColour", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		c.exec(t, `INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, in_flight, heartbeat_at) VALUES
			('w-live', 'host-a', 101, 'v1.2.3', '{default,payments}', '{billing.charge,mail.send}', 8, 3, now() - interval '5 seconds'),
			('w-stale', 'host-b', 202, 'v1.2.3', '{default}', '{mail.send}', 4, 1, now() - interval '5 minutes')`)
		rec, doc := c.page(t, "/workers")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		live := doc.Find(`[data-worker="w-live"]`)
		stale := doc.Find(`[data-worker="w-stale"]`)
		if squash(byTestID(live, "worker-state")) != "live" || squash(byTestID(stale, "worker-state")) != "stale" {
			t.Fatalf("states: live row %q, stale row %q", squash(byTestID(live, "worker-state")), squash(byTestID(stale, "worker-state")))
		}
		if !byTestID(stale, "worker-state").HasClass("stale") || !stale.HasClass("stale-row") {
			t.Error("the stale worker is not styled as stale")
		}
		row := squash(live)
		for _, want := range []string{"host-a", "101", "v1.2.3", "default", "payments", "3 / 8"} {
			if !strings.Contains(row, want) {
				t.Errorf("live row %q lacks %q", row, want)
			}
		}
		if !regexp.MustCompile(`\b[0-9] s ago`).MatchString(row) {
			t.Errorf("live row %q does not say how old the heartbeat is", row)
		}
		if got := squash(byTestID(doc.Selection, "workers-summary")); got != "1 live · 1 stale" {
			t.Errorf("summary %q", got)
		}
	})

	t.Run("EmptyExplainsHowToStartOne", func(t *testing.T) {
		t.Parallel()
		c := newConsole(t)
		_, doc := c.page(t, "/workers")
		if got := squash(byTestID(doc.Selection, "workers-empty")); !strings.Contains(got, "redrive worker --queues default") {
			t.Errorf("empty state %q", got)
		}
	})
}
