package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// BenchmarkDeadLetterPages times every console page of the read side, end
// to end through the real server (routing, queries, templ rendering),
// against one million seeded letters. Seeding takes a few minutes, once,
// and only when benchmarks run: plain `go test` never gets here.
//
//	go test ./handlers -run '^$' -bench DeadLetterPages -benchtime 50x
//
// Each case reports its median latency as median-ms besides Go's mean.
// REDRIVE_BENCH_DSN names an already seeded database to use instead, so
// that plans and timings can be iterated on without reseeding.
func BenchmarkDeadLetterPages(b *testing.B) {
	db := benchLetters(b)
	now := time.Now().UTC()
	store := storetest.NewStores(db.DB)
	// The banners kept as `redrive serve` keeps them.
	h, err := web.NewServer(web.Config{DB: store.DB, BannerWindow: web.BannerWindow})
	if err != nil {
		b.Fatal(err)
	}
	// A benchmark database is reused across runs: its viewer may exist.
	h = benchViewer(b, h, store)

	// Real values to filter by: a popular and a rare fingerprint, a letter
	// id, a cursor half way down, a unique order number.
	var popular, rare, task string
	var id int64
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(db.Get(&popular, `SELECT fingerprint FROM error_groups ORDER BY total DESC LIMIT 1`))
	must(db.Get(&rare, `SELECT fingerprint FROM error_groups ORDER BY total, fingerprint LIMIT 1`))
	must(db.Get(&task, `SELECT task FROM dead_letter_counts GROUP BY task ORDER BY sum(n) LIMIT 1`))
	must(db.Get(&id, `SELECT id FROM dead_letters ORDER BY id DESC LIMIT 1 OFFSET 500000`))
	var mid dlq.DeadLetter
	must(db.Get(&mid, `SELECT id, failed_at FROM dead_letters ORDER BY failed_at DESC, id DESC LIMIT 1 OFFSET 400000`))
	cursor := dlq.CursorAfter(mid).String()

	cases := []struct{ name, path string }{
		{"List/Default", "/dead-letters"},
		{"List/AllStatuses", "/dead-letters?status=all"},
		{"List/ByTaskRare", "/dead-letters?task=" + task},
		{"List/ByStatusDiscarded", "/dead-letters?status=discarded"},
		{"List/ByFingerprintPopular", "/dead-letters?fingerprint=" + popular},
		{"List/ByFingerprintRare", "/dead-letters?fingerprint=" + rare + "&status=all"},
		{"List/ByReason", "/dead-letters?reason=lease_expired"},
		{"List/ByErrorClass", "/dead-letters?error_class=KeyError&status=all"},
		{"List/SearchCommon", "/dead-letters?q=connection+refused&status=all"},
		{"List/SearchRare", "/dead-letters?q=ord_123457&status=all"},
		{"List/SearchNoMatch", "/dead-letters?q=zebra+crossing&status=all"},
		{"List/Since24h", "/dead-letters?since=24h"},
		{"List/SinceUntilWindow", "/dead-letters?status=all&since=" + url.QueryEscape(now.Add(-72*time.Hour).Format(time.RFC3339)) +
			"&until=" + url.QueryEscape(now.Add(-48*time.Hour).Format(time.RFC3339))},
		{"List/TaskAndSearch", "/dead-letters?task=billing.charge&q=declined&status=all"},
		{"List/DeepCursor", "/dead-letters?status=all&cursor=" + cursor},
		{"List/Limit500", "/dead-letters?status=all&limit=500"},
		{"Detail", fmt.Sprintf("/dead-letters/%d", id)},
		{"Groups/Pending", "/groups"},
		{"Groups/LastSeen", "/groups?sort=last_seen"},
		{"API/List", "/api/v1/dead-letters?limit=100"},
		{"API/List50", "/api/v1/dead-letters?limit=50"},
		{"API/Detail", fmt.Sprintf("/api/v1/dead-letters/%d", id)},
		{"API/Groups", "/api/v1/groups"},
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

// benchSeed holds the database seeded by the first benchmark run of this
// process: `go test -bench -count 5` runs BenchmarkDeadLetterPages five
// times, and a million letters are seeded once. The database lives until
// storetest.Main drops it at the end of the test binary.
var benchSeed struct {
	once sync.Once
	dsn  string
}

// benchLetters returns a database of a million letters: the one
// REDRIVE_BENCH_DSN names, or a test database seeded on first use.
func benchLetters(b *testing.B) *storetest.DB {
	ctx := context.Background()
	dsn := os.Getenv("REDRIVE_BENCH_DSN")
	if dsn == "" {
		benchSeed.once.Do(func() {
			db := storetest.NewDB(b)
			start := time.Now()
			if err := storetest.SeedDeadLetters(ctx, db.DB, 1_000_000, time.Now()); err != nil {
				b.Fatal(err)
			}
			b.Logf("seeded 1,000,000 letters in %s", time.Since(start).Round(time.Second))
			benchSeed.dsn = db.DSN
		})
		if dsn = benchSeed.dsn; dsn == "" {
			b.Fatal("seeding failed in an earlier run")
		}
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return &storetest.DB{DB: db, DSN: dsn}
}
