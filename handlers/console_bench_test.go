package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// seedJobsSQL makes $1 jobs shaped like a busy queue's history: mostly
// succeeded, some dead, a backlog of a few percent waiting or retrying and
// a few running, on four queues and a dozen tasks, one task rare. Each
// retrying job carries a two-attempt history.
const seedJobsSQL = `
INSERT INTO jobs (queue, task, args, kwargs, state, attempt, max_attempts, run_at, lease_owner,
	lease_expires_at, last_error, errors, created_at, attempted_at, finished_at)
SELECT (ARRAY['default', 'payments', 'email', 'bulk'])[1 + g % 4],
	CASE WHEN g % 5000 = 0 THEN 'rare.task' ELSE 'task.' || (g % 12) END,
	jsonb_build_array(g, 'order-' || g), jsonb_build_object('region', 'eu'),
	s, CASE WHEN s = 'available' THEN 0 ELSE 1 + g % 4 END, 5,
	CASE WHEN s = 'retrying' THEN now() + interval '40 seconds' ELSE now() - (($1 - g) || ' seconds')::interval END,
	CASE WHEN s = 'running' THEN 'worker-' || (g % 8) END,
	CASE WHEN s = 'running' THEN now() + interval '30 seconds' END,
	CASE WHEN s IN ('retrying', 'dead') THEN 'TimeoutError: upstream timed out' END,
	CASE WHEN s = 'retrying' THEN '[{"attempt":1,"at":"2026-01-01T00:00:00Z","class":"TimeoutError","message":"upstream timed out","outcome":"retry","retry_in_ms":4000,"duration_ms":30000},{"attempt":2,"at":"2026-01-01T00:01:00Z","class":"TimeoutError","message":"upstream timed out","outcome":"retry","retry_in_ms":40000,"duration_ms":30000}]'::jsonb ELSE '[]' END,
	now() - (($1 - g) || ' seconds')::interval,
	CASE WHEN s <> 'available' THEN now() - (($1 - g) || ' seconds')::interval END,
	CASE WHEN s IN ('succeeded', 'dead') THEN now() - (($1 - g) || ' seconds')::interval END
FROM (SELECT g, CASE WHEN g % 100 < 80 THEN 'succeeded' WHEN g % 100 < 92 THEN 'dead'
		WHEN g % 100 < 97 THEN 'available' WHEN g % 100 < 99 THEN 'retrying' ELSE 'running' END AS s
	FROM generate_series(1, $1) g) x`

// BenchmarkConsolePages times the overview, jobs, job detail, workers and
// metrics pages end to end through the real server (routing, queries, templ
// rendering) against one million seeded dead letters and 200,000 jobs.
// Seeding takes a few minutes, once, and only when benchmarks run: plain
// `go test` never gets here.
//
//	go test ./handlers -run '^$' -bench ConsolePages -benchtime 50x
//
// Each case reports its median latency as median-ms besides Go's mean.
func BenchmarkConsolePages(b *testing.B) {
	ctx := context.Background()
	db := benchLetters(b) // 1M letters, or REDRIVE_BENCH_DSN's database
	var seeded bool
	if err := db.GetContext(ctx, &seeded, `SELECT EXISTS (SELECT 1 FROM jobs)`); err != nil {
		b.Fatal(err)
	}
	if !seeded {
		start := time.Now()
		if _, err := db.ExecContext(ctx, seedJobsSQL, 200_000); err != nil {
			b.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, in_flight, heartbeat_at)
			SELECT 'worker-' || g, 'host-' || g, 1000 + g, 'v1.4.2', '{default,payments,email,bulk}',
				ARRAY(SELECT 'task.' || t FROM generate_series(0, 11) t), 8, g % 8,
				now() - CASE WHEN g = 8 THEN interval '10 minutes' ELSE interval '3 seconds' END
			FROM generate_series(1, 8) g`); err != nil {
			b.Fatal(err)
		}
		// As autovacuum would have by the time anyone looks: statistics for
		// the planner and a visibility map for index-only scans, on the
		// letters' summaries as much as on the jobs.
		if _, err := db.ExecContext(ctx, `VACUUM ANALYZE`); err != nil {
			b.Fatal(err)
		}
		b.Logf("seeded 200,000 jobs and vacuumed in %s", time.Since(start).Round(time.Second))
	}
	store := storetest.NewStores(db.DB)
	h, err := web.NewServer(web.Config{DB: store.DB})
	if err != nil {
		b.Fatal(err)
	}
	// A benchmark database is reused across runs: its viewer may exist.
	h = benchViewer(b, h, store)
	var retrying, dead, old int64
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(db.Get(&retrying, `SELECT max(id) FROM jobs WHERE state = 'retrying'`))
	must(db.Get(&dead, `SELECT max(id) FROM jobs WHERE state = 'dead'`))
	must(db.Get(&old, `SELECT id FROM jobs ORDER BY id DESC LIMIT 1 OFFSET 150000`))

	cases := []struct{ name, path string }{
		{"Overview", "/"},
		{"Overview/Fragment", "/overview/fragment"},
		{"Jobs/All", "/jobs"},
		{"Jobs/Available", "/jobs?state=available"},
		{"Jobs/Succeeded", "/jobs?state=succeeded"},
		{"Jobs/Dead", "/jobs?state=dead"},
		{"Jobs/ByQueue", "/jobs?queue=payments"},
		{"Jobs/ByTask", "/jobs?task=task.3"},
		{"Jobs/ByTaskRare", "/jobs?task=rare.task"},
		{"Jobs/ByTaskAndState", "/jobs?task=task.3&state=dead"},
		{"Jobs/DeepCursor", fmt.Sprintf("/jobs?before=%d", old)},
		{"Jobs/Limit500", "/jobs?limit=500"},
		{"JobDetail/Retrying", fmt.Sprintf("/jobs/%d", retrying)},
		{"JobDetail/Dead", fmt.Sprintf("/jobs/%d", dead)},
		{"Workers", "/workers"},
		{"Metrics", "/metrics"},
		{"API/Job", fmt.Sprintf("/api/v1/jobs/%d", retrying)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
				took = append(took, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %.300s", tc.path, rec.Code, rec.Body.String())
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
		})
	}
}
