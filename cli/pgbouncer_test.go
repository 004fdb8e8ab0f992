package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// syncBuffer collects the logs of commands running at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The worker and the console behind PgBouncer in transaction mode, as most
// managed Postgres offerings put it in front: before, lib/pq's two round
// trips per query met other clients' server connections ("bind message
// supplies 2 parameters, but prepared statement "" requires 4") and jobs
// stayed running until their leases ran out.
func TestWorkerAndConsoleBehindPgBouncer(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	bouncer, pooled := storetest.Bouncer(t, db, "transaction")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t)
	vars := map[string]string{
		"DATABASE_URL": pooled, "REDRIVE_ADDR": addr, "REDRIVE_SESSION_KEYS": strings.Repeat("ab", 32),
		"REDRIVE_LOG_LEVEL": "info",
	}
	getenv := func(k string) string { return vars[k] }
	var logs syncBuffer

	// Migrations refuse the pooler, saying what to do, and run given a
	// direct URL.
	err := run(ctx, []string{"migrate"}, env{getenv: getenv, stdout: io.Discard, stderr: &logs})
	if err == nil || !strings.Contains(err.Error(), "REDRIVE_MIGRATE_DATABASE_URL") {
		t.Fatalf("migrate through the pooler: %v, want a refusal naming REDRIVE_MIGRATE_DATABASE_URL", err)
	}
	vars["REDRIVE_MIGRATE_DATABASE_URL"] = db.DSN
	if err := run(ctx, []string{"migrate"}, env{getenv: getenv, stdout: io.Discard, stderr: &logs}); err != nil {
		t.Fatalf("migrate with REDRIVE_MIGRATE_DATABASE_URL: %v", err)
	}

	store := storetest.NewStores(db.DB)
	reg := worker.NewRegistry()
	demo.Register(reg, db.DB)
	if err := store.Queue.RegisterTasks(ctx, reg.Tasks()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := store.Access.CreateUser(ctx, dlq.NewUser{Name: "ops", Role: dlq.RoleAdmin, PasswordHash: []byte("x"), Actor: dlq.Actor{Name: "t"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Access.CreateToken(ctx, dlq.NewToken{UserName: "ops", Hash: dlq.HashToken(secret), Actor: dlq.Actor{Name: "t"}, Now: now}); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 2)
	go func() { done <- run(ctx, []string{"serve"}, env{getenv: getenv, stdout: io.Discard, stderr: &logs}) }()
	go func() {
		done <- run(ctx, []string{"worker", "--demo-tasks", "--queues", "default", "--concurrency", "40",
			"--retry-base", "20ms", "--retry-cap", "100ms"}, env{getenv: getenv, stdout: io.Discard, stderr: &logs})
	}()
	api := consoleClient{t: t, base: "http://" + addr, token: secret}
	api.waitUp()

	// 1,000 jobs through the console: 700 succeed, 200 fail once then
	// succeed, 100 fail for good.
	const payment = `"order_id": "ord_1", "amount": "9.99", "currency": "EUR", "email": "a@example.com"`
	for batch := range 4 {
		var jobs []string
		for i := range 250 {
			switch n := batch*250 + i; {
			case n%10 < 7:
				jobs = append(jobs, fmt.Sprintf(`{"task": %q}`, demo.TaskNoop))
			case n%10 < 9:
				jobs = append(jobs, fmt.Sprintf(`{"task": %q, "kwargs": {"fail_times": 1, %s}}`, demo.TaskFlaky, payment))
			default:
				jobs = append(jobs, fmt.Sprintf(`{"task": %q, "kwargs": {"kind": "validation", %s}}`, demo.TaskPermanent, payment))
			}
		}
		api.do(http.MethodPost, "/api/v1/jobs/batch", `{"jobs": [`+strings.Join(jobs, ",")+`]}`, http.StatusCreated)
	}
	counts := waitJobsEnd(t, db, 1000, 3*time.Minute)
	if counts["succeeded"] != 900 || counts["dead"] != 100 {
		t.Fatalf("job states %v, want 900 succeeded and 100 dead", counts)
	}
	var retried int
	if err := db.Get(&retried, `SELECT count(*) FROM jobs WHERE task = $1 AND state = 'succeeded' AND attempt = 2`, demo.TaskFlaky); err != nil || retried != 200 {
		t.Fatalf("%d flaky jobs succeeded at their second attempt, want 200 (%v)", retried, err)
	}

	// The console's reads and actions, through the pooler.
	var letters struct {
		Items []struct {
			ID   int64  `json:"id"`
			Task string `json:"task"`
		} `json:"items"`
	}
	api.get("/api/v1/dead-letters?limit=100", &letters)
	if len(letters.Items) != 100 {
		t.Fatalf("the console lists %d dead letters, want 100", len(letters.Items))
	}
	for _, path := range []string{"/readyz", "/", "/dead-letters", "/groups", "/jobs", "/workers", "/audit",
		"/api/v1/groups", "/api/v1/audit", fmt.Sprintf("/dead-letters/%d", letters.Items[0].ID)} {
		api.do(http.MethodGet, path, "", http.StatusOK)
	}
	var replayed struct {
		ReplayJobID int64 `json:"replay_job_id"`
	}
	api.decode(api.do(http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/replay", letters.Items[0].ID), `{}`, http.StatusOK), &replayed)
	api.do(http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", letters.Items[1].ID), `{"reason": "customer gone"}`, http.StatusOK)
	api.do(http.MethodPost, "/api/v1/dead-letters/discard",
		fmt.Sprintf(`{"ids": [%d, %d], "reason": "duplicate"}`, letters.Items[2].ID, letters.Items[3].ID), http.StatusOK)
	waitJobsEnd(t, db, 1001, time.Minute) // the replay fails for good again
	var replayState string
	var discarded int
	if err := db.Get(&replayState, `SELECT state FROM jobs WHERE id = $1`, replayed.ReplayJobID); err != nil || replayState != "dead" {
		t.Fatalf("replay job %d is %q (%v), want dead", replayed.ReplayJobID, replayState, err)
	}
	if err := db.Get(&discarded, `SELECT count(*) FROM dead_letters WHERE discarded_at IS NOT NULL`); err != nil || discarded != 3 {
		t.Fatalf("%d letters discarded, want 3 (%v)", discarded, err)
	}

	cancel()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("command ended with %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("worker or console did not stop")
		}
	}
	out := logs.String()
	for _, bad := range []string{"08P01", "26000", "prepared statement", "bind message", "jsonb version", "level=ERROR"} {
		if strings.Contains(out, bad) {
			t.Errorf("the logs say %q:\n%s", bad, out)
		}
	}
	if !strings.Contains(out, "where LISTEN cannot work: the worker polls") {
		t.Errorf("no log line says the worker falls back to polling:\n%s", out)
	}
	if l := bouncer.Log(); strings.Contains(l, "ERROR") {
		t.Errorf("PgBouncer logged errors:\n%s", l)
	}
}

// waitJobsEnd waits until n jobs have ended (succeeded or dead) and
// returns the count of jobs in each state.
func waitJobsEnd(t *testing.T, db *storetest.DB, n int, within time.Duration) map[string]int {
	t.Helper()
	counts := map[string]int{}
	storetest.WaitFor(t, within, fmt.Sprintf("%d jobs to end", n), func() bool {
		var rows []struct {
			State string `db:"state"`
			N     int    `db:"n"`
		}
		if err := db.Select(&rows, `SELECT state, count(*) AS n FROM jobs GROUP BY state`); err != nil {
			t.Fatal(err)
		}
		clear(counts)
		for _, r := range rows {
			counts[r.State] = r.N
		}
		return counts["succeeded"]+counts["dead"] >= n
	})
	return counts
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// consoleClient calls the console with an API token.
type consoleClient struct {
	t     *testing.T
	base  string
	token string
}

func (c consoleClient) waitUp() {
	c.t.Helper()
	storetest.WaitFor(c.t, 30*time.Second, "the console to be up", func() bool {
		resp, err := http.Get(c.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// do sends a request and fails the test unless it answers want; it
// returns the body.
func (c consoleClient) do(method, path, body string, want int) []byte {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return b
}

func (c consoleClient) get(path string, out any) {
	c.decode(c.do(http.MethodGet, path, "", http.StatusOK), out)
}

func (c consoleClient) decode(b []byte, out any) {
	c.t.Helper()
	if err := json.Unmarshal(b, out); err != nil {
		c.t.Fatalf("decode %s: %v", b, err)
	}
}
