package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/storetest"
)

// planNode is the part of EXPLAIN (ANALYZE, FORMAT JSON) the test reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	IndexName    string     `json:"Index Name"`
	RelationName string     `json:"Relation Name"`
	ActualRows   float64    `json:"Actual Rows"`
	Loops        float64    `json:"Actual Loops"`
	Plans        []planNode `json:"Plans"`
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
func claimPlan(t *testing.T, db *storetest.DB, queues []string, limit int) (read float64, nodes []string) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var raw string
	query, args := queue.ClaimQuery(queues, nil, limit)
	if err := tx.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) `+query, args...); err != nil {
		t.Fatalf("explain claim: %v", err)
	}
	read, nodes = jobsRead(t, raw)
	return read, nodes
}

// jobsRead reads an EXPLAIN (ANALYZE, FORMAT JSON) of a claim: the rows
// its scans of jobs read, but for the UPDATE's own lookup of each claimed
// row (jobs_pkey), and the node types met.
func jobsRead(t *testing.T, raw string) (read float64, nodes []string) {
	t.Helper()
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
			if n.IndexName != "jobs_pkey" && n.RelationName == "jobs" {
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
	db := storetest.NewDB(t)
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
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(ctx, []string{"plan.test"}); err != nil {
		t.Fatal(err)
	}
	res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "plan.test", Queue: "emails", Args: json.RawMessage(`[1,"a"]`),
		Kwargs: json.RawMessage(`{"k":"v"}`), IdempotencyKey: "every-column", MaxAttempts: 3, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := store.Queue.Claim(ctx, "w1", []string{"emails"}, 10, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	stored, err := store.Queue.Job(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(claimed[0], stored) {
		t.Fatalf("the claim returned\n%+v\nthe store reads\n%+v", claimed[0], stored)
	}
}

// TestClaimAfterSkipsTheDrainedHead: jobs claimed since the last VACUUM
// leave dead entries at the head of jobs_claimable_idx, and a claim from
// the head steps over all of them (a cost that grew through a drain until
// the claim was half the database's time). A claim after the position of
// the last claimed job reads a few pages whatever was drained before it,
// and still takes the jobs due after it in order.
func TestClaimAfterSkipsTheDrainedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	const drained, waiting, limit = 50_000, 1_000, 50
	db.MustExec(`INSERT INTO jobs (task, queue, run_at)
		SELECT 'plan.test', 'default', now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, $1) i`, drained+waiting)
	db.MustExec(`VACUUM ANALYZE jobs`)
	// A drain without VACUUM: the first jobs ran and succeeded.
	db.MustExec(`UPDATE jobs SET state = 'succeeded', attempt = 1, attempted_at = now(), finished_at = now()
		WHERE id IN (SELECT id FROM jobs ORDER BY run_at, id LIMIT $1)`, drained)
	var last dlq.Job
	if err := db.GetContext(ctx, &last, `SELECT id, run_at FROM jobs WHERE state = 'succeeded' ORDER BY run_at DESC, id DESC LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	queues := []string{"default"}
	after := map[string]dlq.Position{"default": dlq.PositionOf(last)}
	explainClaim(t, db, queues, nil, limit) // marks the dead entries killed, as the worker's claims do
	head := explainClaim(t, db, queues, nil, limit)
	positioned := explainClaim(t, db, queues, after, limit)
	t.Logf("%d jobs drained ahead: from the head the walk touched %.0f buffers (%.2f ms in all), after the last claimed %.0f (%.2f ms)",
		drained, head.walkBuffers, head.ms, positioned.walkBuffers, positioned.ms)
	if head.claimed != limit || positioned.claimed != limit {
		t.Fatalf("claimed %d from the head and %d after the position, want %d each", head.claimed, positioned.claimed, limit)
	}
	if head.walkBuffers < 100 {
		t.Fatalf("the walk from the head touched %.0f buffers: the drained head is not there to skip", head.walkBuffers)
	}
	// The next rows' index page or two, the heap pages of the 50 rows.
	if positioned.walkBuffers > 10 {
		t.Errorf("the walk after the last claimed job touched %.0f buffers, want a few (from the head: %.0f)", positioned.walkBuffers, head.walkBuffers)
	}

	// The jobs it takes are the next due ones, the same the head's walk takes.
	store := storetest.NewStores(db.DB)
	jobs, err := store.Queue.ClaimAfter(ctx, "w1", queues, after, limit, time.Minute)
	if err != nil || len(jobs) != limit {
		t.Fatalf("claim after: %d jobs, %v", len(jobs), err)
	}
	var first int64
	if err := db.GetContext(ctx, &first, `SELECT min(id) FROM jobs WHERE state = 'running'`); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if !dlq.PositionOf(last).Before(dlq.PositionOf(j)) || j.ID >= first+limit {
			t.Fatalf("job %d (run_at %s) claimed: not among the %d due right after the position", j.ID, j.RunAt, limit)
		}
	}
}

// TestClaimCommitsAsynchronously: the claim's own transaction commits with
// synchronous_commit off (see claimSQL), and only it: the connection's
// next transaction, an outcome's write, waits for its flush as before.
func TestClaimCommitsAsynchronously(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	db.MustExec(`INSERT INTO jobs (task) SELECT 'plan.test' FROM generate_series(1, 3)`)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	show := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		var v string
		if err := q.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// The test clusters run without it; production servers, with.
	if _, err := conn.ExecContext(ctx, `SET synchronous_commit = on`); err != nil {
		t.Fatal(err)
	}
	for _, after := range []map[string]dlq.Position{nil, {"default": {}}} {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		query, args := queue.ClaimQuery([]string{"default"}, after, 1)
		var n int
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil || n != 1 {
			t.Fatalf("claimed %d jobs (%v), want 1", n, err)
		}
		rows.Close()
		if v := show(tx); v != "off" {
			t.Errorf("claim after %v: synchronous_commit is %q in the claim's transaction, want off", after, v)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if v := show(conn); v != "on" {
			t.Errorf("claim after %v: synchronous_commit is %q once the claim committed, want on again", after, v)
		}
	}
}

// TestClaimGenericPlansAreFlat: the worker runs both claims with their
// generic plans (postgres.PreparedGeneric), made once on each connection
// and kept until the table's statistics change. Like the custom plans
// (TestClaimCostIsFlat), each must walk the index and stop after the
// limit's rows: with the backlog the plan was made on, after the backlog
// grew two hundredfold without an ANALYZE, and once analyzed again.
func TestClaimGenericPlansAreFlat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	queues := []string{"default", "emails", "payments"}
	const limit = 25
	fill := func(n int) {
		db.MustExec(`INSERT INTO jobs (task, queue, run_at)
			SELECT 'plan.test', (ARRAY['default', 'emails', 'payments'])[1 + i % 3], now() - i * interval '1 ms'
			FROM generate_series(1, $1) i`, n)
	}
	fill(1_000)
	db.MustExec(`ANALYZE jobs`)
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	after := map[string]dlq.Position{}
	for _, q := range queues {
		after[q] = dlq.Position{RunAt: time.Now().Add(-24 * time.Hour)}
	}
	type claim struct {
		name      string
		throttled bool
		from      map[string]dlq.Position
		query     string
	}
	var claims []claim
	for _, throttled := range []bool{false, true} {
		for _, from := range []map[string]dlq.Position{nil, after} {
			c := claim{name: fmt.Sprintf("claim_%d", len(claims)), throttled: throttled, from: from}
			if throttled {
				c.query, _ = queue.ThrottledClaimQuery(queues, from, limit)
			} else {
				c.query, _ = queue.ClaimQuery(queues, from, limit)
			}
			if _, err := conn.ExecContext(ctx, `PREPARE `+c.name+` AS `+c.query); err != nil {
				t.Fatal(err)
			}
			claims = append(claims, c)
		}
	}
	check := func(stage string) {
		t.Helper()
		for _, c := range claims {
			// The throttled claims with a throttle open on the task they
			// walk and a room of the limit; the plain ones with none.
			db.MustExec(`DELETE FROM throttles`)
			_, args := queue.ClaimQuery(queues, c.from, limit)
			if c.throttled {
				var id int64
				if err := db.Get(&id, `INSERT INTO throttles (kind, name, max_running, reason, set_by)
					VALUES ('task', 'plan.test', 100000, 'test', 'plan-test') RETURNING id`); err != nil {
					t.Fatal(err)
				}
				_, args = queue.ThrottledClaimQuery(queues, c.from, limit, queue.Room{ThrottleID: id, Revision: 1, Room: limit})
			}
			read, claimed, nodes := genericClaimPlan(t, conn, c.name, args)
			if max := float64(len(queues) * (limit + 1)); read > max || claimed < limit {
				t.Errorf("%s, %s (throttled %v): the generic plan read %.0f rows of jobs and claimed %d, want at most %.0f and the limit (%d) (plan: %v)",
					stage, c.name, c.throttled, read, claimed, max, limit, nodes)
			}
		}
	}
	check("made on 1,000 jobs")
	fill(200_000)
	check("200,000 more jobs, not analyzed")
	db.MustExec(`ANALYZE jobs`)
	check("analyzed")
}

// genericClaimPlan runs the prepared claim name with args under EXPLAIN
// (ANALYZE) in a transaction it rolls back, and returns the rows the
// scans of jobs read, the jobs it claimed and the node types met.
func genericClaimPlan(t *testing.T, conn *sqlx.Conn, name string, args []any) (read float64, claimed int, nodes []string) {
	t.Helper()
	ctx := context.Background()
	literals := make([]string, len(args))
	for i, a := range args {
		if v, ok := a.(driver.Valuer); ok {
			var err error
			if a, err = v.Value(); err != nil {
				t.Fatal(err)
			}
		}
		if b, ok := a.([]byte); ok {
			a = string(b)
		}
		literals[i] = pq.QuoteLiteral(fmt.Sprint(a))
	}
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var raw string
	if err := tx.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE `+name+`(`+strings.Join(literals, ", ")+`)`); err != nil {
		t.Fatalf("explain %s: %v", name, err)
	}
	read, nodes = jobsRead(t, raw)
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM jobs WHERE state = 'running'`); err != nil {
		t.Fatal(err)
	}
	return read, n, nodes
}
