package reliability

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// long selects the long mode of `make reliability`: more jobs, more kills,
// longer loads. The default, short mode fits in `make test`.
var long = flag.Bool("long", false, "run the reliability suites at full size and print their figures")

// size picks the short or the long figure.
func size[T any](short, full T) T {
	if *long {
		return full
	}
	return short
}

// figures logs one suite's results on a line `make reliability` keeps.
func figures(t *testing.T, suite, format string, args ...any) {
	t.Helper()
	t.Logf("figures: %s: %s", suite, fmt.Sprintf(format, args...))
}

// childOpts configures one worker process.
type childOpts struct {
	Concurrency int
	Lease       time.Duration
	Grace       time.Duration
	Queues      []string
}

// proc is one worker process: this test binary run as a child.
type proc struct {
	id   string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// fleet starts, kills and restarts worker processes on one database, and
// kills whatever is left when the test ends.
type fleet struct {
	t      *testing.T
	dsn    string
	opts   childOpts
	logDir string
	mu     sync.Mutex
	procs  map[string]*proc
	starts map[string]int
	queues map[string][]string
}

func newFleet(t *testing.T, dsn string, opts childOpts) *fleet {
	t.Helper()
	f := &fleet{t: t, dsn: dsn, opts: opts, logDir: t.TempDir(), procs: map[string]*proc{}, starts: map[string]int{}, queues: map[string][]string{}}
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.procs {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			f.dumpLogs()
		}
	})
	return f
}

// setQueues makes worker id work queues instead of the fleet's.
func (f *fleet) setQueues(id string, queues []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[id] = queues
}

// start runs worker id (again, if it ran before).
func (f *fleet) start(id string) *proc {
	f.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts[id]++
	queues := f.opts.Queues
	if q, ok := f.queues[id]; ok {
		queues = q
	}
	logFile, err := os.OpenFile(filepath.Join(f.logDir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "REDRIVE_REL_DSN="+f.dsn, "REDRIVE_REL_ID="+id,
		"REDRIVE_REL_CONCURRENCY="+strconv.Itoa(f.opts.Concurrency),
		"REDRIVE_REL_LEASE_MS="+strconv.FormatInt(f.opts.Lease.Milliseconds(), 10),
		"REDRIVE_REL_GRACE_MS="+strconv.FormatInt(f.opts.Grace.Milliseconds(), 10),
		"REDRIVE_REL_QUEUES="+strings.Join(queues, ","))
	fmt.Fprintf(logFile, "--- start %d of %s\n", f.starts[id], id)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		f.t.Fatalf("start worker %s: %v", id, err)
	}
	p := &proc{id: id, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	f.procs[id] = p
	return p
}

// kill SIGKILLs worker id and waits for it to die.
func (f *fleet) kill(id string) {
	f.mu.Lock()
	p := f.procs[id]
	f.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.done
}

// term sends SIGTERM to worker id and waits up to timeout for it to exit;
// it returns how long the worker took.
func (f *fleet) term(id string, timeout time.Duration) (time.Duration, error) {
	f.mu.Lock()
	p := f.procs[id]
	f.mu.Unlock()
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return time.Since(start), p.err
	case <-time.After(timeout):
		return time.Since(start), fmt.Errorf("worker %s did not exit within %s of SIGTERM", id, timeout)
	}
}

// exited reports whether worker id has exited, and how.
func (f *fleet) exited(id string) (bool, error) {
	f.mu.Lock()
	p := f.procs[id]
	f.mu.Unlock()
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

func (f *fleet) dumpLogs() {
	entries, _ := os.ReadDir(f.logDir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(f.logDir, e.Name()))
		if len(b) > 6000 {
			b = b[len(b)-6000:]
		}
		f.t.Logf("worker log %s (tail):\n%s", e.Name(), b)
	}
}

// console is the console as `redrive serve` runs it (server, replay
// runner) on 127.0.0.1, with an operator's API token.
type console struct {
	URL   string
	token string
	http  *http.Client
}

// startConsole serves the console on db until the test ends. The operator
// "ops" is created when absent, so two consoles can share a database.
func startConsole(t *testing.T, db *sqlx.DB) *console {
	t.Helper()
	store := storetest.NewStores(db)
	if _, err := store.Access.UserByName(context.Background(), "ops"); errors.Is(err, dlq.ErrNotFound) {
		webtest.CreateUser(t, store.Access, "ops", dlq.RoleOperator)
	} else if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	runner := replay.NewRunner(replay.RunnerConfig{Store: store.Operations, Logger: logger, PollInterval: 200 * time.Millisecond})
	handler, err := web.NewServer(web.Config{DB: store.DB, Logger: logger, Version: "reliability",
		Replay: replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue, Logger: logger, Wake: runner.Wake})})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = runner.Run(ctx); close(ran) }()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-ran
	})
	return &console{URL: "http://" + ln.Addr().String(), token: webtest.Token(t, store.Access, "ops"),
		http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 100}}}
}

// response is one answer of the console.
type response struct {
	status int
	header http.Header
	body   []byte
	err    error
	took   time.Duration
}

// do sends one API request with the operator's token.
func (c *console) do(method, path, body string, header ...string) response {
	req, err := http.NewRequest(method, c.URL+path, strings.NewReader(body))
	if err != nil {
		return response{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	start := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		return response{err: err, took: time.Since(start)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b, err: err, took: time.Since(start)}
}

func (r response) String() string {
	if r.err != nil {
		return r.err.Error()
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// waitFor polls cond every 50 ms until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	storetest.WaitFor(t, timeout, what, cond)
}

// count runs a query that returns one integer; an error counts as -1, so
// that a poll through a database outage keeps polling.
func count(db *sqlx.DB, query string, args ...any) int {
	var n int
	if err := db.Get(&n, query, args...); err != nil {
		return -1
	}
	return n
}

func mustCount(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Get(&n, query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// effectsOnce checks that every job of rel.effect applied its effect
// exactly once, and returns the deliveries and suppressed duplicates.
func effectsOnce(t *testing.T, db *sqlx.DB, events int) (deliveries, suppressed int) {
	t.Helper()
	if n := mustCount(t, db, `SELECT count(DISTINCT event) FROM rel_effects`); n != events {
		t.Errorf("%d events applied, want %d: effects lost", n, events)
		var lost []struct {
			ID        int64
			State     string
			Attempt   int
			Errors    string
			Processed bool
			Delivered int
		}
		_ = db.Select(&lost, `SELECT j.id, j.state, j.attempt, j.errors::text AS errors,
			EXISTS (SELECT 1 FROM processed_events p WHERE p.external_id = 'rel:' || (j.kwargs->>'event')) AS processed,
			(SELECT count(*) FROM rel_deliveries d WHERE d.event = j.kwargs->>'event') AS delivered
			FROM jobs j WHERE j.task = $1 AND NOT EXISTS (SELECT 1 FROM rel_effects e WHERE e.event = j.kwargs->>'event') LIMIT 5`, taskEffect)
		for _, l := range lost {
			t.Logf("lost effect: job %d %s attempt %d, processed %v, %d deliveries, history %s", l.ID, l.State, l.Attempt, l.Processed, l.Delivered, l.Errors)
		}
	}
	if n := mustCount(t, db, `SELECT count(*) FROM (SELECT event FROM rel_effects GROUP BY event HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d events applied more than once", n)
	}
	return mustCount(t, db, `SELECT count(*) FROM rel_deliveries`), mustCount(t, db, `SELECT count(*) FROM rel_suppressed`)
}

// setupEffects creates rel.effect's tables and registers every child task.
func setupEffects(t *testing.T, db *sqlx.DB) {
	t.Helper()
	if _, err := db.Exec(effectTablesSQL); err != nil {
		t.Fatal(err)
	}
	if err := storetest.NewStores(db).Queue.RegisterTasks(context.Background(), allTasks()); err != nil {
		t.Fatal(err)
	}
}

// seedEffectLetters inserts n pending dead letters of rel.effect whose
// events are prefix1..prefixN, each on its own account at version 1.
func seedEffectLetters(t *testing.T, db *sqlx.DB, n int, prefix string) {
	t.Helper()
	_, err := db.Exec(`
INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
	attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at)
SELECT 10000000 + (SELECT count(*) FROM dead_letter_records) + g, 'default', $2, '[]',
	jsonb_build_object('event', $3 || g, 'account', 1000000 + g, 'version', 1),
	'RuntimeError', 'boom', '', 5, 5, '[]', 'exhausted', 'rel-fingerprint', 'v1',
	now() - interval '1 hour', now() - interval '30 minutes'
FROM generate_series(1, $1) g`, n, taskEffect, prefix)
	if err != nil {
		t.Fatalf("seed letters: %v", err)
	}
}

// percentile returns the p-th percentile (0-100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
