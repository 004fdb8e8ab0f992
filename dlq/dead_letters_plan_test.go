package dlq_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

// letterScan is the part of EXPLAIN (ANALYZE, FORMAT JSON) that
// TestPendingFingerprintReadsUseTheFingerprintIndex reads.
type letterScan struct {
	NodeType string       `json:"Node Type"`
	Relation string       `json:"Relation Name"`
	Index    string       `json:"Index Name"`
	Rows     float64      `json:"Actual Rows"`
	Removed  float64      `json:"Rows Removed by Filter"`
	Loops    float64      `json:"Actual Loops"`
	Subplan  string       `json:"Subplan Name"`
	Plans    []letterScan `json:"Plans"`
}

// scansOfLetters walks a plan and returns the scans of dead_letters (under
// the CTE named cte, when not empty) and the rows they returned or
// filtered out.
func scansOfLetters(t *testing.T, raw, cte string) (scans []letterScan, read float64) {
	t.Helper()
	var plans []struct {
		Plan letterScan `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	var walk func(n letterScan, in bool)
	walk = func(n letterScan, in bool) {
		in = in || n.Subplan == "CTE "+cte
		if in && n.Relation == "dead_letters" {
			scans = append(scans, n)
			read += (n.Rows + n.Removed) * n.Loops
		}
		for _, c := range n.Plans {
			walk(c, in)
		}
	}
	walk(plans[0].Plan, cte == "")
	return scans, read
}

// TestPendingFingerprintReadsUseTheFingerprintIndex: migration 00030 drops
// the partial index on pending letters by fingerprint, which every
// dead-lettering had to write. The reads it served, a group's pending
// letters as a page and as the batches of a bulk replay, walk the
// status-less fingerprint index instead and read about as many letters as
// they return; their count comes from error_groups.
func TestPendingFingerprintReadsUseTheFingerprintIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	if err := dlqtest.SeedDeadLetters(ctx, db.DB, 20_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	var fp string
	var pending int64
	if err := db.QueryRowContext(ctx, `SELECT fingerprint, count(*) FILTER (WHERE status = 'pending') FROM dead_letters
		GROUP BY 1 ORDER BY count(*) DESC LIMIT 1`).Scan(&fp, &pending); err != nil {
		t.Fatal(err)
	}
	if pending < 200 {
		t.Fatalf("the largest group has %d pending letters: too few for the test", pending)
	}
	f := dlq.Filter{Fingerprint: fp, Status: dlq.StatusPending}

	// The page.
	const limit = 50
	q, args := dlq.ListPageSQL(f, limit)
	var raw string
	if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) `+q, args...); err != nil {
		t.Fatal(err)
	}
	scans, read := scansOfLetters(t, raw, "")
	if len(scans) != 1 || scans[0].NodeType != "Index Scan" || scans[0].Index != "dead_letters_fingerprint_idx" {
		t.Fatalf("the page of a group's pending letters scans %+v, want one Index Scan of dead_letters_fingerprint_idx", scans)
	}
	if read > 2*(limit+1) {
		t.Fatalf("a page of %d read %.0f letters", limit, read)
	}

	// The count: exact, from the group's summary, not from an index.
	n, err := store.CountDeadLetters(ctx, f)
	if err != nil || !n.Exact || n.N != pending {
		t.Fatalf("count %+v, %v; want exactly %d", n, err, pending)
	}

	// A batch of a bulk replay of the group's pending letters.
	op, err := store.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
		Reason: "plan test", Selection: dlq.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err = store.ExplainOperationBatch(ctx, op.ID, limit)
	if err != nil {
		t.Fatal(err)
	}
	scans, read = scansOfLetters(t, raw, "batch")
	if len(scans) != 1 || scans[0].Index != "dead_letters_fingerprint_idx" {
		t.Fatalf("a bulk replay batch scans %+v, want dead_letters_fingerprint_idx", scans)
	}
	if read > 2*limit {
		t.Fatalf("a bulk replay batch of %d read %.0f letters", limit, read)
	}
}
