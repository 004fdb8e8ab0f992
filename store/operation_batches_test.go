package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// batchScanNode is the part of EXPLAIN (ANALYZE, FORMAT JSON) that
// TestBatchReadsOnlyWhatItTakes reads.
type batchScanNode struct {
	NodeType string          `json:"Node Type"`
	Relation string          `json:"Relation Name"`
	Rows     float64         `json:"Actual Rows"`
	Removed  float64         `json:"Rows Removed by Filter"`
	Loops    float64         `json:"Actual Loops"`
	Subplan  string          `json:"Subplan Name"`
	Plans    []batchScanNode `json:"Plans"`
}

// TestBatchReadsOnlyWhatItTakes: a batch of a filtered operation reads
// about as many letters as it takes, wherever the matching letters lie,
// rather than every letter between its cursor and the next match.
func TestBatchReadsOnlyWhatItTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	insertLetters(t, db, 2000)
	// One letter in ten failed in the last hour, spread over the ids, as
	// after an incident among a backlog of older letters.
	// The letters are pending: their pending rows carry failed_at too
	// (00101_letters.sql), and must keep the letters' own.
	if _, err := db.Exec(`WITH r AS (
		UPDATE dead_letter_records SET failed_at = now() - CASE WHEN id % 10 = 0 THEN interval '1 minute'
			ELSE interval '2 days' END
		RETURNING id, failed_at)
	UPDATE pending_dead_letters p SET failed_at = r.failed_at FROM r WHERE p.id = r.id`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`VACUUM ANALYZE dead_letter_records, pending_dead_letters, dead_letter_outcomes`); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	// The replay takes two batches of the 200; the discard then finds the rest.
	for i, kind := range []dlq.OperationKind{dlq.OpReplay, dlq.OpDiscard} {
		op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: kind, Actor: alice, Now: time.Now(), Reason: "incident",
			Selection: dlq.Selection{Filter: filterOf(t, "since="+since)}})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(200 - 100*i); op.Matched != want {
			t.Fatalf("matched %d, want %d", op.Matched, want)
		}
		// Once at the start and once from a cursor part way through.
		for range 2 {
			const limit = 50
			raw, err := store.Operations.ExplainOperationBatch(ctx, op.ID, limit)
			if err != nil {
				t.Fatal(err)
			}
			var plans []struct {
				Plan batchScanNode `json:"Plan"`
			}
			if err := json.Unmarshal([]byte(raw), &plans); err != nil {
				t.Fatal(err)
			}
			// Rows the scans under the CTE that picks the batch
			// returned or filtered out. A batch picks its letters from
			// pending_dead_letters (00101_letters.sql).
			read, scans := 0.0, 0
			var walk func(n batchScanNode, inBatch bool)
			walk = func(n batchScanNode, inBatch bool) {
				inBatch = inBatch || n.Subplan == "CTE batch"
				if inBatch && n.Relation != "" {
					if n.Relation != "pending_dead_letters" {
						t.Errorf("%s: the batch reads %s, want only pending_dead_letters", kind, n.Relation)
					}
					scans++
					read += (n.Rows + n.Removed) * n.Loops
				}
				for _, c := range n.Plans {
					walk(c, inBatch)
				}
			}
			walk(plans[0].Plan, false)
			if scans == 0 {
				t.Fatalf("%s: no scan under CTE batch in the plan:\n%s", kind, raw)
			}
			if read > 2*limit {
				t.Fatalf("%s: a batch of %d read %.0f letters", kind, limit, read)
			}
			if res, err := store.Operations.RunOperationBatch(ctx, op.ID, limit, time.Now()); err != nil || res.Acted != limit {
				t.Fatalf("%s batch: %+v %v", kind, res, err)
			}
		}
	}
}
