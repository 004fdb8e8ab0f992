package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/seed"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// BenchmarkBulkReplay100k replays 100,000 letters matching a filter, out
// of a million, end to end: the API call, the durable operation, the
// runner's batches (its default size), until the operation is done. One
// op is one such replay; letters/s is the figure to compare. Each
// iteration takes the next 100,000 pending letters by failure time
// ("everything that failed since the incident began"), so -benchtime 3x
// replays three disjoint slices of the same million; those later
// iterations also pay for the earlier ones (new row versions in every
// index, autovacuum cleaning up beside them). Seeding takes a few
// minutes, once, and only when benchmarks run:
//
//	go test ./handlers -run '^$' -bench BulkReplay100k -benchtime 1x
func BenchmarkBulkReplay100k(b *testing.B) {
	const total, slice = 1_000_000, 100_000
	ctx := context.Background()
	db := storetest.NewDB(b)
	store := storetest.NewStores(db.DB)
	start := time.Now()
	if n, err := seed.DeadLetters(ctx, store.Letters, store.Groups, total, time.Now(), seed.Options{}); err != nil || n != total {
		b.Fatalf("seeded %d of %d: %v", n, total, err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE dead_letters, dead_letter_search`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d letters in %s", total, time.Since(start).Round(time.Second))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner := replay.NewRunner(replay.RunnerConfig{Store: store.Operations})
	go runner.Run(runCtx)
	h, err := web.NewServer(web.Config{DB: store.DB, Replay: replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue, Wake: runner.Wake})})
	if err != nil {
		b.Fatal(err)
	}
	webtest.CreateUser(b, store.Access, "bench", dlq.RoleOperator)
	token := webtest.Token(b, store.Access, "bench")
	call := func(method, path, body string) (int, map[string]any) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		return rec.Code, out
	}

	until := time.Time{}
	replayed := int64(0)
	for b.Loop() {
		// The window: the newest `slice` pending letters failed before until.
		b.StopTimer()
		var since time.Time
		q := `SELECT failed_at FROM dead_letters WHERE status = 'pending' AND ($1::timestamptz IS NULL OR failed_at < $1)
			ORDER BY failed_at DESC, id DESC OFFSET $2 LIMIT 1`
		var bound *time.Time
		if !until.IsZero() {
			bound = &until
		}
		if err := db.GetContext(ctx, &since, q, bound, slice-1); err != nil {
			b.Fatalf("find the window: %v", err)
		}
		filter := map[string]string{"since": since.UTC().Format(time.RFC3339Nano)}
		if !until.IsZero() {
			filter["until"] = until.UTC().Format(time.RFC3339Nano)
		}
		body, _ := json.Marshal(map[string]any{"filter": filter, "wait_seconds": 120, "reason": "benchmark"})
		b.StartTimer()
		began := time.Now()

		code, op := call(http.MethodPost, "/api/v1/dead-letters/replay", string(body))
		for code == http.StatusAccepted {
			code, op = call(http.MethodGet, fmt.Sprintf("/api/v1/operations/%d", int64(op["operation_id"].(float64))), "")
		}
		if code != http.StatusOK || op["state"] != "done" {
			b.Fatalf("bulk replay: %d %v", code, op)
		}
		n := int64(op["replayed"].(float64))
		if n < slice {
			b.Fatalf("replayed %d, want at least %d", n, slice)
		}
		replayed += n
		until = since
		b.Logf("replayed %d letters in %s", n, time.Since(began).Round(100*time.Millisecond))
	}
	b.ReportMetric(float64(replayed)/b.Elapsed().Seconds(), "letters/s")
	b.ReportMetric(float64(replayed)/float64(b.N), "letters/op")
}
