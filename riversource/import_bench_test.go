package riversource_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/riversource"
)

// BenchmarkImport100k imports 100,000 jobs River discarded, written
// straight into river_job as River's own discards look (an error for each
// of three attempts; River keeps a stack trace only of a panic, here one
// job in ten, 20 frames), from an empty cursor to the end:
// go test ./riversource -run '^$' -bench Import100k -benchtime 1x.
func BenchmarkImport100k(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		db, stores := ordersApp(b)
		pool, _ := riverApp(b, db.DSN)
		if _, err := db.Exec(`
			INSERT INTO river_job (state, attempt, max_attempts, attempted_at, created_at, finalized_at, scheduled_at,
				priority, args, errors, kind, queue, metadata, tags)
			SELECT 'discarded', 3, 3, now() - interval '1 minute', now() - interval '2 minutes',
				now() - interval '1 minute' + g * interval '1 microsecond', now() - interval '2 minutes', 1,
				jsonb_build_object('order', 'ord_' || g, 'customer', 'cus_' || (g % 5000)),
				ARRAY(SELECT jsonb_build_object('at', now() - interval '1 minute', 'attempt', a,
					'error', 'payments provider answered 503 Service Unavailable for order ord_' || g,
					'trace', CASE WHEN a = 3 AND g % 10 = 0 THEN repeat('main.(*chargeWorker).Work /srv/app/charge.go:42' || E'\n', 20) ELSE '' END)
					FROM generate_series(1, 3) a),
				(ARRAY['charge_card', 'refund_order', 'send_receipt'])[1 + g % 3], 'payments', '{}', '{checkout}'
			FROM generate_series(1, 100000) g`); err != nil {
			b.Fatal(err)
		}
		source, err := riversource.New(riversource.Config{Source: "orders-app", Pool: pool, Store: stores.Sources})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := source.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM letter_sources`); err != nil || n != 100000 {
			b.Fatalf("%d letters imported (err %v), want 100,000", n, err)
		}
		b.ReportMetric(float64(n)/elapsed.Seconds(), "letters/s")
	}
}
