package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker/demo"
)

// lockedBuffer is a log sink the test reads while the worker writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWorkerServesJobMetrics runs `redrive worker --metrics-addr` in
// process, lets it run a job, and scrapes its /metrics: the job's outcome
// is there, not only the Go runtime's numbers.
func TestWorkerServesJobMetrics(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(store.Queue.RegisterTasks(ctx, []string{demo.TaskNoop}))
	job, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: demo.TaskNoop, Queue: "default", MaxAttempts: 1})
	must(err)

	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"worker", "--demo-tasks", "--metrics-addr", "127.0.0.1:0", "--log-format", "json"},
			func(k string) string { return map[string]string{"DATABASE_URL": db.DSN}[k] }, strings.NewReader(""), io.Discard, logs)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	metricsURL := ""
	storetest.WaitFor(t, 20*time.Second, "the worker to say where its metrics are", func() bool {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var line struct{ Msg, URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "worker metrics listening" {
				metricsURL = line.URL
			}
		}
		return metricsURL != ""
	})
	storetest.WaitFor(t, 20*time.Second, fmt.Sprintf("job %d to succeed", job.Job.ID), func() bool {
		var state dlq.State
		must(db.GetContext(ctx, &state, `SELECT state FROM jobs WHERE id = $1`, job.Job.ID))
		return state == dlq.StateSucceeded
	})

	// The outcome is counted when the success is acknowledged, which may
	// trail the row's update by a flush: poll the scrape briefly.
	const want = `redrive_job_outcomes_total{outcome="succeeded",queue="default",task="demo.noop"} 1`
	var body string
	t.Cleanup(func() {
		if t.Failed() && body != "" {
			t.Logf("GET %s, last:\n%s", metricsURL, body)
		}
	})
	storetest.WaitFor(t, 10*time.Second, fmt.Sprintf("GET %s to show %s", metricsURL, want), func() bool {
		resp, err := http.Get(metricsURL)
		must(err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		must(err)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", metricsURL, resp.StatusCode)
		}
		body = string(b)
		return strings.Contains(body, want)
	})
	if !strings.Contains(body, "redrive_job_duration_seconds_bucket") {
		t.Errorf("GET %s lacks redrive_job_duration_seconds", metricsURL)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("worker exited %d:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30s of its context ending")
	}
}
