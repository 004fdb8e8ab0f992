package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/storetest"
)

// letterScan is the part of EXPLAIN (ANALYZE, FORMAT JSON) that
// TestPendingFingerprintReadsUseTheFingerprintIndex reads.
type letterScan struct {
	NodeType string       `json:"Node Type"`
	Relation string       `json:"Relation Name"`
	Index    string       `json:"Index Name"`
	Cond     string       `json:"Index Cond"`
	Rows     float64      `json:"Actual Rows"`
	Removed  float64      `json:"Rows Removed by Filter"`
	Loops    float64      `json:"Actual Loops"`
	Subplan  string       `json:"Subplan Name"`
	Plans    []letterScan `json:"Plans"`
}

// letterTables are the tables a letter lives in (00101_letters.sql):
// its facts, its pending row while pending, its outcome once settled.
var letterTables = map[string]bool{"dead_letter_records": true, "pending_dead_letters": true, "dead_letter_outcomes": true}

// scansOfLetters walks a plan and returns the scans of the letters' tables
// (under the CTE named cte, when not empty) and, by table, the rows they
// returned or filtered out.
func scansOfLetters(t *testing.T, raw, cte string) (scans []letterScan, read map[string]float64) {
	t.Helper()
	var plans []struct {
		Plan letterScan `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	read = map[string]float64{}
	var walk func(n letterScan, in bool)
	walk = func(n letterScan, in bool) {
		in = in || n.Subplan == "CTE "+cte
		if in && letterTables[n.Relation] {
			scans = append(scans, n)
			read[n.Relation] += (n.Rows + n.Removed) * n.Loops
		}
		for _, c := range n.Plans {
			walk(c, in)
		}
	}
	walk(plans[0].Plan, cte == "")
	return scans, read
}

// fingerprintWalks are the scans that walk an index on the fingerprint in
// its order: an Index Scan (or Index Only Scan) with the fingerprint in its
// condition, as dead_letters_fingerprint_idx (fingerprint, failed_at DESC,
// id DESC) serves a group's letters newest first. A bitmap scan is no such
// walk: it reads the whole group before any letter comes out.
func fingerprintWalks(scans []letterScan) []letterScan {
	var walks []letterScan
	for _, s := range scans {
		if (s.NodeType == "Index Scan" || s.NodeType == "Index Only Scan") && strings.Contains(s.Cond, "fingerprint") {
			walks = append(walks, s)
		}
	}
	return walks
}

// TestPendingFingerprintReadsUseTheFingerprintIndex: no index holds the
// pending letters by fingerprint, which every dead-lettering would have to
// write. A group's pending letters, as a page and as the batches of a bulk
// replay, walk the letters' fingerprint index and read about as many
// letters as they return; their count comes from error_groups. A letter
// lives in three tables (letterTables): whichever of them serves the read,
// it walks an index on the fingerprint and reads about as many rows of
// each table as it returns.
func TestPendingFingerprintReadsUseTheFingerprintIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := storetest.SeedDeadLetters(ctx, db.DB, 20_000, time.Now()); err != nil {
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
	q, args := letters.ListPageSQL(f, limit)
	var raw string
	if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) `+q, args...); err != nil {
		t.Fatal(err)
	}
	scans, read := scansOfLetters(t, raw, "")
	if walks := fingerprintWalks(scans); len(walks) != 1 {
		t.Errorf("the page of a group's pending letters scans %+v, want one of them an index walk on fingerprint", scans)
	}
	for table, n := range read {
		if n > 2*(limit+1) {
			t.Errorf("a page of %d read %.0f rows of %s", limit, n, table)
		}
	}

	// The count: exact, from the group's summary, not from an index.
	n, err := store.Letters.CountDeadLetters(ctx, f)
	if err != nil || !n.Exact || n.N != pending {
		t.Fatalf("count %+v, %v; want exactly %d", n, err, pending)
	}

	// A batch of a bulk replay of the group's pending letters.
	op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
		Reason: "plan test", Selection: dlq.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err = store.Operations.ExplainOperationBatch(ctx, op.ID, limit)
	if err != nil {
		t.Fatal(err)
	}
	scans, read = scansOfLetters(t, raw, "batch")
	if walks := fingerprintWalks(scans); len(walks) != 1 {
		t.Errorf("a bulk replay batch scans %+v, want one of them an index walk on fingerprint", scans)
	}
	for table, n := range read {
		if n > 2*limit {
			t.Errorf("a bulk replay batch of %d read %.0f rows of %s", limit, n, table)
		}
	}
}

// TestSeveralGroupsWalkEachGroupsIndex: the ordered reads of several
// groups' letters (an incident's), a page and a bulk replay's batch, walk
// the fingerprint index once per group and merge the walks, which stop as
// soon as the read has its letters: they read about as many rows as they
// return, however large the groups, where one scan of fingerprint =
// ANY(...) reads and sorts every letter of every group. Their count is the
// sum of the groups' summaries.
func TestSeveralGroupsWalkEachGroupsIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := storetest.SeedDeadLetters(ctx, db.DB, 20_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	var groups []string
	var pending int64
	if err := db.SelectContext(ctx, &groups, `SELECT fingerprint FROM dead_letters
		GROUP BY 1 ORDER BY count(*) DESC LIMIT 2`); err != nil {
		t.Fatal(err)
	}
	if err := db.GetContext(ctx, &pending, `SELECT count(*) FROM pending_dead_letters WHERE fingerprint = ANY($1)`,
		pq.Array(groups)); err != nil {
		t.Fatal(err)
	}
	if pending < 400 {
		t.Fatalf("the two largest groups have %d pending letters: too few for the test", pending)
	}
	f := dlq.Filter{Fingerprints: groups, Status: dlq.StatusPending}

	// The page.
	const limit = 50
	q, args := letters.ListPageSQL(f, limit)
	var raw string
	if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) `+q, args...); err != nil {
		t.Fatal(err)
	}
	scans, read := scansOfLetters(t, raw, "")
	assertWalkPerGroup(t, "the page", scans, groups)
	for table, n := range read {
		if n > float64(2*len(groups)*(limit+1)) {
			t.Errorf("a page of %d of %d groups read %.0f rows of %s", limit, len(groups), n, table)
		}
	}

	n, err := store.Letters.CountDeadLetters(ctx, f)
	if err != nil || !n.Exact || n.N != pending {
		t.Fatalf("count %+v, %v; want exactly %d", n, err, pending)
	}

	// A batch of a bulk replay of the groups' pending letters.
	op, err := store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
		Reason: "plan test", Selection: dlq.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err = store.Operations.ExplainOperationBatch(ctx, op.ID, limit)
	if err != nil {
		t.Fatal(err)
	}
	scans, read = scansOfLetters(t, raw, "batch")
	assertWalkPerGroup(t, "a bulk replay batch", scans, groups)
	for table, n := range read {
		if n > float64(2*len(groups)*limit) {
			t.Errorf("a bulk replay batch of %d of %d groups read %.0f rows of %s", limit, len(groups), n, table)
		}
	}
}

// assertWalkPerGroup checks that scans walk the fingerprint index once
// for each group, each walk one range of its own group.
func assertWalkPerGroup(t *testing.T, what string, scans []letterScan, groups []string) {
	t.Helper()
	walks := fingerprintWalks(scans)
	walked := map[string]bool{}
	for _, w := range walks {
		for _, g := range groups {
			if w.Loops == 1 && strings.Contains(w.Cond, "'"+g+"'") {
				walked[g] = true
			}
		}
	}
	if len(walks) != len(groups) || len(walked) != len(groups) {
		t.Errorf("%s scans %+v, want an index walk on fingerprint for each of the groups %v", what, scans, groups)
	}
}
