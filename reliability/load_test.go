package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/store/storetest"
)

// TestLoad has 50 readers browse the console as fast as they can while a
// bulk replay of thousands of letters runs and a worker runs the replayed
// jobs. No request fails, and each page's p50 and p99 are reported.
func TestLoad(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	setupEffects(t, db.DB)
	ctx := context.Background()
	letters := size(2000, 20000)
	// storetest's realistic mix is 80% pending: seed enough for the replay.
	if err := storetest.SeedDeadLetters(ctx, db.DB, letters*5/4, time.Now()); err != nil {
		t.Fatal(err)
	}
	pending := mustCount(t, db.DB, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`)
	c := startConsole(t, db.DB)
	f := newFleet(t, db.DSN, childOpts{Concurrency: 20, Lease: 10 * time.Second, Grace: time.Second,
		Queues: []string{"default", "payments", "email", "bulk"}})
	f.start("load-w1")

	const readers = 50
	duration := size(5*time.Second, time.Minute)
	pages := []string{"/", "/dead-letters", "/dead-letters?task=billing.charge", "/groups", "/jobs", "/workers", "/audit",
		"/api/v1/dead-letters", "/api/v1/groups"}
	res := c.do("POST", "/api/v1/dead-letters/replay", `{"filter":{"since":"90d"},"reason":"load","wait_seconds":0}`)
	var op struct {
		OperationID int64 `json:"operation_id"`
		Matched     int64 `json:"matched"`
	}
	if err := json.Unmarshal(res.body, &op); err != nil || res.status >= 300 || op.OperationID == 0 {
		t.Fatalf("start bulk replay: %s", res)
	}
	replayStart := time.Now()

	var mu sync.Mutex
	took := map[string][]time.Duration{}
	var failures []string
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			for i := r; time.Now().Before(stop); i++ {
				page := pages[i%len(pages)]
				resp := c.do("GET", page, "")
				mu.Lock()
				if resp.err != nil || resp.status != 200 {
					failures = append(failures, fmt.Sprintf("GET %s: %.200s", page, resp))
				} else {
					took[page] = append(took[page], resp.took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	waitFor(t, size(2*time.Minute, 10*time.Minute), "the bulk replay to finish", func() bool {
		return count(db.DB, `SELECT count(*) FROM operations WHERE id = $1 AND state IN ('done', 'cancelled', 'failed')`, op.OperationID) == 1
	})
	replayTook := time.Since(replayStart)
	var state string
	if err := db.Get(&state, `SELECT state FROM operations WHERE id = $1`, op.OperationID); err != nil || state != "done" {
		t.Errorf("bulk replay ended %q (%v), want done", state, err)
	}
	if n := mustCount(t, db.DB, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 0 {
		t.Errorf("%d of %d letters still pending after the replay", n, pending)
	}
	if len(failures) > 0 {
		t.Errorf("%d requests failed under load, e.g.:\n%s", len(failures), strings.Join(failures[:min(5, len(failures))], "\n"))
	}
	if t.Failed() {
		return
	}
	total := 0
	var lines []string
	for _, p := range pages {
		ds := took[p]
		total += len(ds)
		lines = append(lines, fmt.Sprintf("%s p50 %s p99 %s (%d)", p, percentile(ds, 50).Round(time.Millisecond), percentile(ds, 99).Round(time.Millisecond), len(ds)))
	}
	figures(t, "load", "%d readers for %s during a bulk replay of %d letters (done in %s) with a worker running: %d requests, 0 errors; %s",
		readers, duration, pending, replayTook.Round(100*time.Millisecond), total, strings.Join(lines, "; "))
}
