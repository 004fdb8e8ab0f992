package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// BenchmarkArgumentQueries reads the plan of one page of the list (50
// letters, pending, newest first) for qualifiers on the arguments of a
// million seeded letters, common and rare, alone and with a task, after
// the store's probe (letters.ArgProbe), and times the probe and the bulk
// confirmation's exact count of the same selection. Each case reports
// the page's median execution time (EXPLAIN ANALYZE, over b.N runs) with
// its min and max, the buffers it touched, the probe's median time and
// the exact count's:
//
//	REDRIVE_BENCH_DSN=postgres://... go test ./store -run '^$' -bench ArgumentQueries -benchtime 7x
//
// REDRIVE_BENCH_DSN names a database seeded with `redrive seed
// --dead-letters 1000000`; without it a test database is seeded first,
// which takes a few minutes.
func BenchmarkArgumentQueries(b *testing.B) {
	ctx := context.Background()
	db := millionLetters(b)
	store := storetest.NewStores(db)
	var customer string
	if err := db.GetContext(ctx, &customer, `SELECT kwargs->>'customer' FROM dead_letter_records
		WHERE task = 'payments.charge' ORDER BY id LIMIT 1 OFFSET 1000`); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, query string }{
		{"EqCommon", "q=kwargs.currency:EUR"},
		{"EqRare", "q=kwargs.customer:" + customer},
		{"RangeCommon", "q=kwargs.amount>100"},
		{"RangeRare", "q=kwargs.amount>999"},
		{"RangeNearCap", "q=kwargs.amount>980"}, // 4,732 letters: the probe's costliest narrowing
		{"RangeNone", "q=kwargs.amount>1000"},
		{"TextRangeRare", `q=kwargs.crm_id>="99990000"`},
		{"NotCommon", "q=not kwargs.currency:EUR"},
		{"NotRare", "q=kwargs.amount>0 and not kwargs.amount<=999"},
		{"OrRare", "q=kwargs.amount>999 or kwargs.account_id>19990"},
		{"TaskEqCommon", "task=payments.charge&q=kwargs.currency:EUR"},
		{"TaskRangeCommon", "task=payments.charge&q=kwargs.amount>100"},
		{"TaskRangeRare", "task=payments.charge&q=kwargs.amount>999"},
		{"TaskRangeNone", "task=inventory.reserve&q=kwargs.amount>999"},
	} {
		b.Run(c.name, func(b *testing.B) {
			v, err := url.ParseQuery(c.query)
			if err != nil {
				b.Fatal(err)
			}
			f, err := handlers.ParseFilter(v, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			var page, count, probe []float64
			var buffers float64
			var matched int64
			for b.Loop() {
				start := time.Now()
				probed, err := letters.ArgProbe{}.Filter(ctx, db, f)
				if err != nil {
					b.Fatal(err)
				}
				probe = append(probe, float64(time.Since(start).Microseconds())/1000)
				q, args := letters.ListPageSQL(probed, 50)
				var raw string
				if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+q, args...); err != nil {
					b.Fatal(err)
				}
				ms, blocks := executionOf(b, raw)
				page, buffers = append(page, ms), blocks
				start = time.Now()
				p, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: &f}, 10)
				if err != nil {
					b.Fatal(err)
				}
				count, matched = append(count, float64(time.Since(start).Microseconds())/1000), p.Matched
			}
			slices.Sort(page)
			slices.Sort(count)
			slices.Sort(probe)
			b.ReportMetric(page[len(page)/2], "page-ms")
			b.ReportMetric(page[0], "page-min-ms")
			b.ReportMetric(page[len(page)-1], "page-max-ms")
			b.ReportMetric(buffers, "page-buffers")
			b.ReportMetric(probe[len(probe)/2], "probe-ms")
			b.ReportMetric(count[len(count)/2], "preview-ms")
			b.ReportMetric(float64(matched), "matched")
		})
	}
}

// executionOf reads EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON): the
// execution time in ms, and the shared buffers the statement hit or read.
func executionOf(tb testing.TB, raw string) (ms, buffers float64) {
	tb.Helper()
	var plans []struct {
		Plan struct {
			Hit  float64 `json:"Shared Hit Blocks"`
			Read float64 `json:"Shared Read Blocks"`
		} `json:"Plan"`
		Execution float64 `json:"Execution Time"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		tb.Fatal(err)
	}
	return plans[0].Execution, plans[0].Plan.Hit + plans[0].Plan.Read
}

// millionLetters opens the database REDRIVE_BENCH_DSN names, or seeds a
// million letters into a test database of its own.
func millionLetters(b *testing.B) *sqlx.DB {
	ctx := context.Background()
	dsn := os.Getenv("REDRIVE_BENCH_DSN")
	if dsn == "" {
		db := storetest.NewDB(b)
		if err := storetest.SeedDeadLetters(ctx, db.DB, 1_000_000, time.Now()); err != nil {
			b.Fatal(err)
		}
		dsn = db.DSN
	}
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		b.Fatal(fmt.Errorf("open %s: %w", dsn, err))
	}
	b.Cleanup(func() { db.Close() })
	return db
}
