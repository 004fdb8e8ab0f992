package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// The console with REDRIVE_READ_DATABASE_URL, against a real streaming
// replica of its database: its lists, groups and exports read the
// replica (a letter written on the primary while the replica's replay is
// paused is not on them, and the pages say how old their numbers are),
// actions and the pages they lead to use the primary, and a replica that
// lags beyond the bound or stops sends the reads to the primary, with a
// notice, until it recovers.
func TestConsoleReadsFromAStreamingReplica(t *testing.T) {
	t.Parallel()
	primary := storetest.NewPrivate(t)
	replica, replicaDSN := storetest.Replica(t, primary)
	db := primary.DB
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := storetest.NewStores(db.DB)
	secret := adminToken(t, ctx, store)
	if err := store.Queue.RegisterTasks(ctx, []string{"billing.charge", "billing.refund"}); err != nil {
		t.Fatal(err)
	}
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge"})

	addr := freeAddr(t)
	vars := map[string]string{
		"DATABASE_URL": db.DSN, "REDRIVE_READ_DATABASE_URL": replicaDSN, "REDRIVE_READ_MAX_LAG": "8s",
		"REDRIVE_ADDR": addr, "REDRIVE_SESSION_KEYS": strings.Repeat("ab", 32), "REDRIVE_LOG_LEVEL": "info",
	}
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("console log:\n%s", logs.String())
		}
	})
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve"}, env{getenv: func(k string) string { return vars[k] }, stdout: io.Discard, stderr: &logs})
	}()
	api := consoleClient{t: t, base: "http://" + addr, token: secret}
	api.waitUp()
	replicaDB, err := postgres.Open(ctx, replicaDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer replicaDB.Close()

	// Caught up: the replica serves, and the page says nothing about it.
	waitMetric(t, api, "redrive_read_replica_in_use", func(v float64) bool { return v == 1 })
	if page := string(api.do(http.MethodGet, "/dead-letters", "", http.StatusOK)); strings.Contains(page, `data-testid="read-notice"`) {
		t.Fatalf("a caught-up replica's page carries a notice:\n%s", page)
	}

	// Replay paused on the replica, two letters written on the primary.
	if _, err := replicaDB.ExecContext(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	fresh := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.refund"})
	other := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.refund"})
	waitMetric(t, api, "redrive_read_replica_lag_seconds", func(v float64) bool { return v > 1.5 })

	// The reads come from the replica: the new letters are on none of them.
	if n := exported(t, api, "billing.refund"); n != 0 {
		t.Fatalf("the export, read from the paused replica, has %d letters of billing.refund, want 0", n)
	}
	for _, path := range []string{"/dead-letters?task=billing.refund", "/groups", "/"} {
		page := string(api.do(http.MethodGet, path, "", http.StatusOK))
		if strings.Contains(page, fmt.Sprintf(`data-testid="letter-row" data-id="%d"`, fresh)) || strings.Contains(page, "billing.refund</") {
			t.Fatalf("%s shows a letter the replica has not replayed: it did not read the replica", path)
		}
		if !strings.Contains(page, "Numbers as of ") || !strings.Contains(page, `data-testid="read-notice"`) {
			t.Fatalf("%s does not say how old its numbers are:\n%s", path, page)
		}
	}
	// So do the API's lists, and their headers say where and how old.
	for _, path := range []string{"/api/v1/dead-letters?task=billing.refund", "/api/v1/groups?task=billing.refund", "/api/v1/audit"} {
		body, h := apiGet(t, api, path)
		if strings.Contains(string(body), "billing.refund") {
			t.Fatalf("%s shows a letter the replica has not replayed: it did not read the replica:\n%s", path, body)
		}
		lag, err := strconv.ParseFloat(h.Get("Redrive-Read-Lag-Seconds"), 64)
		if h.Get("Redrive-Read-Source") != "replica" || err != nil || lag < 1.5 {
			t.Fatalf("%s: read source %q, lag %q; want the replica, over 1.5 s behind", path, h.Get("Redrive-Read-Source"), h.Get("Redrive-Read-Lag-Seconds"))
		}
	}
	// A letter's page, an action and its confirmation count use the primary.
	if page := string(api.do(http.MethodGet, fmt.Sprintf("/dead-letters/%d", fresh), "", http.StatusOK)); strings.Contains(page, `data-testid="read-notice"`) {
		t.Fatal("a letter's page, read from the primary, carries the replica's notice")
	}
	var replayed struct {
		ReplayJobID int64 `json:"replay_job_id"`
	}
	api.decode(api.do(http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/replay", fresh), `{}`, http.StatusOK), &replayed)
	var jobs int
	if err := db.Get(&jobs, `SELECT count(*) FROM jobs WHERE id = $1`, replayed.ReplayJobID); err != nil || jobs != 1 {
		t.Fatalf("the replay job %d is not on the primary (%d, %v)", replayed.ReplayJobID, jobs, err)
	}
	var matched struct {
		Matched int64 `json:"matched"`
	}
	api.decode(api.do(http.MethodPost, "/api/v1/dead-letters/discard",
		`{"filter": {"task": "billing.refund"}, "dry_run": true, "reason": "count"}`, http.StatusOK), &matched)
	if matched.Matched != 1 { // the other was just replayed
		t.Fatalf("a dry run counts %d pending letters of billing.refund, want 1 (counted on the primary)", matched.Matched)
	}

	// Beyond the bound, reads fall back to the primary, and say so.
	waitMetric(t, api, "redrive_read_replica_in_use", func(v float64) bool { return v == 0 })
	page := string(api.do(http.MethodGet, "/dead-letters?task=billing.refund", "", http.StatusOK))
	if !strings.Contains(page, fmt.Sprintf(`data-testid="letter-row" data-id="%d"`, other)) {
		t.Fatal("fallen back to the primary, the list still misses the new letter")
	}
	if !strings.Contains(page, "The read replica is ") || !strings.Contains(page, "behind (more than 8.0 s): this page reads the primary") {
		t.Fatalf("no fallback notice on the page:\n%s", page)
	}
	if n := exported(t, api, "billing.refund"); n != 1 { // pending ones: the other was replayed
		t.Fatalf("fallen back, the export has %d pending letters of billing.refund, want 1", n)
	}
	if body, h := apiGet(t, api, "/api/v1/dead-letters?task=billing.refund"); !strings.Contains(string(body), fmt.Sprintf(`"id":%d`, other)) ||
		h.Get("Redrive-Read-Source") != "primary" {
		t.Fatalf("fallen back, the API's list reads %q and misses letter %d:\n%s", h.Get("Redrive-Read-Source"), other, body)
	}

	// Replay resumed: back on the replica, without a notice.
	if _, err := replicaDB.ExecContext(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, api, "redrive_read_replica_in_use", func(v float64) bool { return v == 1 })
	if page := string(api.do(http.MethodGet, "/dead-letters", "", http.StatusOK)); strings.Contains(page, `data-testid="read-notice"`) {
		t.Fatalf("back on a caught-up replica, the page carries a notice:\n%s", page)
	}

	// Stopped: reads fall back, the console stays ready; restarted, reads
	// go back to it.
	replicaDB.Close()
	if err := replica.Stop(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, api, "redrive_read_replica_in_use", func(v float64) bool { return v == 0 })
	page = string(api.do(http.MethodGet, "/dead-letters", "", http.StatusOK))
	if !strings.Contains(page, "The read replica cannot be reached: this page reads the primary database instead.") {
		t.Fatalf("no notice of the stopped replica:\n%s", page)
	}
	for _, path := range []string{"/readyz", "/groups", "/", "/jobs", "/workers", "/audit", "/dead-letters/export.csv"} {
		api.do(http.MethodGet, path, "", http.StatusOK)
	}
	if err := replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, api, "redrive_read_replica_in_use", func(v float64) bool { return v == 1 })
	for _, path := range []string{"/groups", "/", "/jobs", "/workers", "/audit", "/dead-letters/export.csv"} {
		api.do(http.MethodGet, path, "", http.StatusOK)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the console did not stop")
	}
	out := logs.String()
	for _, want := range []string{
		"console reads go to the read replica",
		"the read replica is ", "behind (more than 8.0 s): console reads fall back to the primary",
		"console reads are back on the read replica",
		"the read replica cannot be reached: console reads fall back to the primary",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no log line says %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "read-only transaction") || strings.Contains(out, "status=500") {
		t.Errorf("a read failed on the replica:\n%s", out)
	}
}

// adminToken makes an admin and an API token for them, and returns the
// token's secret.
func adminToken(t *testing.T, ctx context.Context, store *storetest.Stores) string {
	t.Helper()
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
	return secret
}

// exported counts the letters of task in the console's JSON export.
func exported(t *testing.T, api consoleClient, task string) int {
	t.Helper()
	var letters []struct {
		ID int64 `json:"id"`
	}
	api.decode(api.do(http.MethodGet, "/dead-letters/export.json?task="+task, "", http.StatusOK), &letters)
	return len(letters)
}

// waitMetric waits until the console's /metrics has name with a value ok
// accepts.
func waitMetric(t *testing.T, api consoleClient, name string, ok func(float64) bool) {
	t.Helper()
	storetest.WaitFor(t, 30*time.Second, "the metric "+name, func() bool {
		for _, line := range strings.Split(string(api.do(http.MethodGet, "/metrics", "", http.StatusOK)), "\n") {
			if v, found := strings.CutPrefix(line, name+" "); found {
				if f, err := strconv.ParseFloat(v, 64); err == nil && ok(f) {
					return true
				}
			}
		}
		return false
	})
}

// apiGet GETs path with the console's token and returns the body and the
// headers of its 200 answer.
func apiGet(t *testing.T, api consoleClient, path string) ([]byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, api.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+api.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", path, resp.StatusCode, err, body)
	}
	return body, resp.Header
}
