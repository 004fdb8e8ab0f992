package dlq_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

// planNode is the part of EXPLAIN (ANALYZE, FORMAT JSON) the test reads.
type planNode struct {
	NodeType   string     `json:"Node Type"`
	IndexName  string     `json:"Index Name"`
	ActualRows float64    `json:"Actual Rows"`
	Loops      float64    `json:"Actual Loops"`
	Plans      []planNode `json:"Plans"`
}

// rowsRead sums the rows every scan of jobs returned, over all its loops,
// and lists the node types met.
func (n planNode) walk(visit func(planNode)) {
	visit(n)
	for _, c := range n.Plans {
		c.walk(visit)
	}
}

// claimPlan runs the claim for limit jobs under EXPLAIN ANALYZE in a
// transaction it rolls back, and returns the rows the scans of jobs read
// and whether any node sorted more than the limit.
func claimPlan(t *testing.T, db *dlqtest.DB, queues []string, limit int) (read float64, nodes []string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var raw string
	if err := tx.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) `+dlq.ClaimSQL,
		pq.Array(queues), limit, "plan-test", 30_000); err != nil {
		t.Fatalf("explain claim: %v", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	plans[0].Plan.walk(func(n planNode) {
		nodes = append(nodes, n.NodeType)
		switch n.NodeType {
		case "Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan":
			if n.IndexName != "jobs_pkey" { // the UPDATE's own lookup of each claimed row
				read += n.ActualRows * n.Loops
			}
		}
	})
	return read, nodes
}

// TestClaimCostIsFlat proves the claim reads the next due rows in index
// order: its cost is O(limit), the same with 1,000 or 200,000 jobs waiting.
// The claim it replaced, queue = ANY($1) ORDER BY run_at, sorted the whole
// backlog on every call (93 ms per claim at 200,000 waiting).
func TestClaimCostIsFlat(t *testing.T) {
	t.Parallel()
	db := dlqtest.NewDB(t)
	queues := []string{"default", "emails", "payments"}
	for _, backlog := range []int{1_000, 200_000} {
		db.MustExec(`TRUNCATE jobs CASCADE`)
		db.MustExec(`INSERT INTO jobs (task, queue, run_at)
			SELECT 'plan.test', (ARRAY['default', 'emails', 'payments'])[1 + i % 3], now() - i * interval '1 ms'
			FROM generate_series(1, $1) i`, backlog)
		db.MustExec(`ANALYZE jobs`)
		for _, limit := range []int{10, 100} {
			read, nodes := claimPlan(t, db, queues, limit)
			// Each queue's scan stops after limit rows (SKIP LOCKED may read
			// one more); nothing reads the backlog.
			if max := float64(len(queues) * (limit + 1)); read > max {
				t.Errorf("backlog %d, limit %d: the claim read %.0f rows of jobs, want at most %.0f (plan: %v)",
					backlog, limit, read, max, nodes)
			}
		}
	}
}

// TestClaimReturnsEveryColumn checks the claim's hand-written scan against
// the job as the store reads it through jobColumns: a column added to one
// and not the other fails here.
func TestClaimReturnsEveryColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	if err := store.RegisterTasks(ctx, []string{"plan.test"}); err != nil {
		t.Fatal(err)
	}
	res, err := store.Enqueue(ctx, dlq.EnqueueParams{Task: "plan.test", Queue: "emails", Args: json.RawMessage(`[1,"a"]`),
		Kwargs: json.RawMessage(`{"k":"v"}`), IdempotencyKey: "every-column", MaxAttempts: 3, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := store.Claim(ctx, "w1", []string{"emails"}, 10, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	stored, err := store.Job(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(claimed[0], stored) {
		t.Fatalf("the claim returned\n%+v\nthe store reads\n%+v", claimed[0], stored)
	}
}
