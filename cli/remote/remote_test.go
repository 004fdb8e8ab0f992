package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
	"github.com/redrive/redrive/worker"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// console is a real console on 127.0.0.1 over a real database, with the
// bulk runner, a worker that runs billing.charge and email.send (they
// succeed), and an operator's API token.
type console struct {
	url, token string
	db         *storetest.DB
	store      *storetest.Stores
}

func newConsole(t *testing.T) console {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx, cancel := context.WithCancel(context.Background())
	reg := worker.NewRegistry()
	for _, task := range []string{"billing.charge", "email.send"} {
		reg.Register(task, func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
	}
	// The bug behind reports.build is not fixed: its replays fail again.
	reg.Register("reports.build", func(context.Context, *worker.Job) error {
		return worker.Permanent(errors.New("template reports/q3.tmpl not found"))
	}, worker.TaskOptions{})
	if err := store.Queue.RegisterTasks(ctx, reg.Tasks()); err != nil {
		t.Fatal(err)
	}
	wk, err := worker.New(store.Queue, worker.Config{Registry: reg, Concurrency: 4, PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runner := replay.NewRunner(replay.RunnerConfig{Store: store.Operations, PollInterval: 20 * time.Millisecond})
	errs := make(chan error, 2)
	go func() { errs <- runner.Run(ctx) }()
	go func() { errs <- wk.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("runner or worker: %v", err)
			}
		}
	})
	h, err := web.NewServer(web.Config{DB: store.DB, Replay: replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue, Wake: runner.Wake})})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h) // a real listener on 127.0.0.1
	t.Cleanup(srv.Close)
	webtest.CreateUser(t, store.Access, "olga", dlq.RoleOperator)
	return console{url: srv.URL, token: webtest.Token(t, store.Access, "olga"), db: db, store: store}
}

// letters inserts n pending letters of the group fp.
func (c console) letters(t *testing.T, n int, task, fp string, failedAt time.Time) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		// The letters' own jobs are long gone: ids far above the jobs
		// sequence, so the replays' jobs, when they fail again, make
		// letters of their own without a clash.
		var jobID int64
		if err := c.db.Get(&jobID, `SELECT 1000000 + count(*) FROM dead_letters`); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{JobID: jobID, Task: task, Fingerprint: fp, FailedAt: failedAt,
			Message: "card declined for order 42", Traceback: "Traceback (most recent call last):\n  charge()"}))
	}
	return ids
}

// run runs one command as the binary would, with stdout and stderr
// captured (not a terminal, so progress comes as plain lines).
func (c console) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return c.runWith(t, c.token, false, args...)
}

func (c console) runWith(t *testing.T, token string, terminal bool, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return map[string]string{EnvURL: c.url, EnvToken: token}[k] }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, newEnv(getenv, &out, &errOut, terminal), args)
	return out.String() + errOut.String(), err
}

func (c console) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := c.db.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// apiError asserts err is the API's error with status and code.
func apiError(t *testing.T, err error, status int, code string) *APIError {
	t.Helper()
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("error %v (%T); want the API's %d %s", err, err, status, code)
	}
	if !strings.Contains(err.Error(), ae.Message) || !strings.Contains(err.Error(), code) {
		t.Fatalf("error text %q should carry the API's message and code", err)
	}
	return ae
}

func TestLetters(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	ids := c.letters(t, 2, "billing.charge", fpCard, time.Now())
	other := c.letters(t, 1, "email.send", "fp-smtp", time.Now())

	t.Run("ListFiltersAsATable", func(t *testing.T) {
		out, err := c.run(t, "letters", "list", "--task", "billing.charge")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "ID") || !strings.Contains(out, fmt.Sprint(ids[0])) || !strings.Contains(out, fpCard) {
			t.Fatalf("table:\n%s", out)
		}
		if strings.Contains(out, "email.send") {
			t.Fatalf("the task filter let email.send through:\n%s", out)
		}
	})
	t.Run("ListAsJSONPagesWithTheCursor", func(t *testing.T) {
		out, err := c.run(t, "letters", "list", "--limit", "2", "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var page LetterPage
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Items) != 2 || page.NextCursor == nil {
			t.Fatalf("json page %v %+v:\n%s", err, page, out)
		}
		out, err = c.run(t, "letters", "list", "--limit", "2", "--output", "json", "--cursor", *page.NextCursor)
		if err != nil {
			t.Fatal(err)
		}
		var next LetterPage
		if err := json.Unmarshal([]byte(out), &next); err != nil || len(next.Items) != 1 || next.Items[0].ID != ids[0] {
			t.Fatalf("second page %v %+v; want letter %d", err, next, ids[0])
		}
	})
	t.Run("ShowOneLetter", func(t *testing.T) {
		out, err := c.run(t, "letters", "show", fmt.Sprint(other[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"email.send", "card declined for order 42", "Traceback (most recent call last)", "fp-smtp", "Attempts:"} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("ShowPrintsWhatEachAttemptLoggedMasked", func(t *testing.T) {
		id := storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{JobID: 2000000, Task: "billing.charge",
			Kwargs: `{"token": "tok_live_9f8e7d6c5b4a"}`, History: `[{"attempt": 1, "at": "2026-03-01T09:00:00Z",
			"class": "HTTPError", "message": "402", "outcome": "dead",
			"logs": "time=09:00:00.001 level=INFO msg=charging\ntime=09:00:00.002 level=WARN msg=refused auth=\"Bearer tok_live_9f8e7d6c5b4a\"\n"}]`})
		out, err := c.run(t, "letters", "show", fmt.Sprint(id))
		if err != nil {
			t.Fatal(err)
		}
		want := "    logged:\n      time=09:00:00.001 level=INFO msg=charging\n      time=09:00:00.002 level=WARN msg=refused auth=\"Bearer •••\"\n"
		if !strings.Contains(out, want) || strings.Contains(out, "tok_live") {
			t.Errorf("show should print the attempt's lines, masked and indented:\n%s", out)
		}
	})
	t.Run("UnknownIDIsTheAPIs404", func(t *testing.T) {
		_, err := c.run(t, "letters", "show", "99999999")
		apiError(t, err, 404, "not_found")
	})
	t.Run("BadFilterIsTheAPIs400", func(t *testing.T) {
		_, err := c.run(t, "letters", "list", "--since", "yesterday-ish")
		ae := apiError(t, err, 400, "invalid")
		if ae.Fields["since"] == "" || !strings.Contains(err.Error(), "since") {
			t.Fatalf("the error should name since: %v", err)
		}
	})
	t.Run("BadTokenIsTheAPIs401", func(t *testing.T) {
		_, err := c.runWith(t, "rdv_not-a-token", false, "letters", "list")
		apiError(t, err, 401, "invalid_token")
	})
	t.Run("CommandLineMistakesAreUsageErrors", func(t *testing.T) {
		for _, args := range [][]string{
			{"letters"}, {"letters", "show"}, {"letters", "show", "x1"}, {"letters", "list", "--output", "yaml"},
			{"groups", "--sort", "loudest"}, {"replay"}, {"replay", "--ids", "1", "--group", "fp"},
			{"replay", "--filter", "colour=red"}, {"discard", "--group", "fp", "--canary", "3"}, {"operations", "watch"},
		} {
			var ue *UsageError
			if _, err := c.run(t, args...); !errors.As(err, &ue) {
				t.Errorf("%v: %v; want a usage error", args, err)
			}
		}
	})
}

func TestGroupsSorts(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.letters(t, 5, "billing.charge", "fp-old", time.Now().Add(-10*24*time.Hour)) // most pending, long ago
	c.letters(t, 2, "email.send", "fp-now", time.Now())                           // arriving now
	order := func(sort string) []string {
		t.Helper()
		out, err := c.run(t, "groups", "--sort", sort, "--output", "json")
		if err != nil {
			t.Fatal(err)
		}
		var groups []Group
		if err := json.Unmarshal([]byte(out), &groups); err != nil {
			t.Fatal(err)
		}
		var fps []string
		for _, g := range groups {
			fps = append(fps, g.Fingerprint)
		}
		return fps
	}
	for sort, want := range map[string]string{"pending": "fp-old fp-now", "newest": "fp-now fp-old", "rate": "fp-now fp-old", "total": "fp-old fp-now"} {
		if got := strings.Join(order(sort), " "); got != want {
			t.Errorf("--sort %s: %s; want %s", sort, got, want)
		}
	}
	out, err := c.run(t, "groups")
	if err != nil || !strings.Contains(out, "PENDING") || !strings.Contains(out, "fp-old") {
		t.Fatalf("table %v:\n%s", err, out)
	}
}

// TestGroupsSortNamesAreTheAPIs: --sort takes the API's names with the
// API's meanings. newest is first seen (what just started breaking), not
// the most recent letter, which is last_seen; last_hour is there too.
func TestGroupsSortNamesAreTheAPIs(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	now := time.Now()
	c.letters(t, 1, "billing.charge", "fp-chronic", now.Add(-5*24*time.Hour)) // an old bug...
	c.letters(t, 1, "billing.charge", "fp-chronic", now.Add(-time.Minute))    // ...that failed again a minute ago
	c.letters(t, 3, "email.send", "fp-fresh", now.Add(-30*time.Minute))       // a new bug, 3 letters this hour
	first := func(sort string) string {
		t.Helper()
		out, err := c.run(t, "groups", "--sort", sort, "--output", "json")
		if err != nil {
			t.Fatalf("--sort %s: %v", sort, err)
		}
		var groups []Group
		if err := json.Unmarshal([]byte(out), &groups); err != nil || len(groups) != 2 {
			t.Fatalf("--sort %s: %v %s", sort, err, out)
		}
		return groups[0].Fingerprint
	}
	for sort, want := range map[string]string{"newest": "fp-fresh", "last_seen": "fp-chronic", "last_hour": "fp-fresh", "pending": "fp-fresh"} {
		if got := first(sort); got != want {
			t.Errorf("--sort %s put %s first; want %s", sort, got, want)
		}
	}
}

// TestOnCallJourney is docs/api.md's three commands ("Remote CLI"): what broke, replay it
// safely, watch it settle.
func TestOnCallJourney(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.letters(t, 3, "email.send", "fp-smtp", time.Now().Add(-3*24*time.Hour))
	ids := c.letters(t, 12, "billing.charge", fpCard, time.Now())

	out, err := c.run(t, "groups", "--sort", "rate")
	if err != nil {
		t.Fatal(err)
	}
	if first := strings.Split(out, "\n")[1]; !strings.HasPrefix(first, fpCard) {
		t.Fatalf("the group breaking now should come first:\n%s", out)
	}

	out, err = c.run(t, "replay", "--group", fpCard, "--canary", "3", "--reason", "card processor fixed", "--wait", "--interval", "50ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var opID int64
	if _, err := fmt.Sscanf(out, "Operation %d: replay of 12 letters started (canary of 3).", &opID); err != nil {
		t.Fatalf("first line: %v\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf("Canary of operation %d: all 3 jobs succeeded. Release the rest: redrive operations release %d --wait", opID, opID)) {
		t.Fatalf("the canary should settle and say what next:\n%s", out)
	}
	if !strings.Contains(out, fmt.Sprintf("operation %d canary: 3 of 12 replayed", opID)) {
		t.Fatalf("no plain progress lines:\n%s", out)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'replayed'`); n != 3 {
		t.Fatalf("%d letters replayed at the canary; want 3", n)
	}

	out, err = c.run(t, "operations", "release", fmt.Sprint(opID), "--wait", "--interval", "50ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf("Operation %d done: 12 of 12 letters replayed, 0 skipped (no longer pending); replays: 12 succeeded, 0 died again", opID)) {
		t.Fatalf("release --wait should end with the summary, once every replay ran:\n%s", out)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'replayed' AND id = ANY($1)`, pq.Array(ids)); n != 12 {
		t.Fatalf("%d of 12 replayed", n)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 3 {
		t.Fatalf("the other group was touched: %d pending", n)
	}
}

// The error groups the fixtures replay by --group: group ids are 16 hex
// digits.
const (
	fpCard   = "00000000000ca4d0"
	fpReport = "0000000000e90470"
)

// TestSeveralGroups: --group takes several groups separated by commas, for
// the letters list and for a bulk replay; an id that is not one is refused
// before anything happens.
func TestSeveralGroups(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.letters(t, 2, "billing.charge", fpCard, time.Now())
	c.letters(t, 3, "reports.build", fpReport, time.Now())
	c.letters(t, 4, "email.send", "fp-smtp", time.Now())
	both := fpCard + "," + fpReport

	out, err := c.run(t, "letters", "list", "--group", both, "--output", "json")
	if err != nil || strings.Count(out, `"fingerprint"`) != 5 || strings.Contains(out, "fp-smtp") {
		t.Fatalf("letters of both groups %v:\n%s", err, out)
	}
	out, err = c.run(t, "replay", "--group", both, "--dry-run")
	if err != nil || !strings.Contains(out, "Dry run: replay would act on 5 pending letters.") {
		t.Fatalf("dry run of both groups %v:\n%s", err, out)
	}
	if _, err := c.run(t, "replay", "--group", fpCard+",fp-smtp", "--dry-run"); err == nil || !strings.Contains(err.Error(), "fingerprint") {
		t.Fatalf("a bad group id: %v, want a refusal naming the fingerprint", err)
	}
}

func TestBulkAndOperations(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	ids := c.letters(t, 4, "billing.charge", fpCard, time.Now())
	c.letters(t, 2, "email.send", "fp-smtp", time.Now())

	out, err := c.run(t, "discard", "--filter", "task=email.send", "--reason", "test traffic", "--dry-run")
	if err != nil || !strings.Contains(out, "Dry run: discard would act on 2 pending letters. Nothing was changed.") {
		t.Fatalf("dry run %v:\n%s", err, out)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 6 {
		t.Fatalf("a dry run changed something: %d pending", n)
	}

	_, err = c.run(t, "replay", "--filter", "since=yesterday-ish", "--reason", "x")
	ae := apiError(t, err, 400, "invalid")
	if ae.Fields["filter.since"] == "" {
		t.Fatalf("the API should name filter.since: %v", err)
	}

	out, err = c.run(t, "replay", "--ids", fmt.Sprintf("%d,%d", ids[0], ids[1]), "--rate", "100", "--wait", "--interval", "50ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var opID int64
	if _, err := fmt.Sscanf(out, "Operation %d:", &opID); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !strings.Contains(out, fmt.Sprintf("Operation %d done: 2 of 2 letters replayed, 0 skipped", opID)) {
		t.Fatalf("--wait should finish with the summary:\n%s", out)
	}

	out, err = c.run(t, "discard", "--filter", "task=email.send", "--reason", "test traffic")
	if err != nil || !strings.Contains(out, "Follow it: redrive operations watch") {
		t.Fatalf("discard without --wait %v:\n%s", err, out)
	}
	var discardID int64
	if _, err := fmt.Sscanf(out, "Operation %d:", &discardID); err != nil {
		t.Fatal(err)
	}
	out, err = c.run(t, "operations", "watch", fmt.Sprint(discardID), "--interval", "50ms")
	if err != nil || !strings.Contains(out, fmt.Sprintf("Operation %d done: 2 of 2 letters discarded", discardID)) {
		t.Fatalf("watch %v:\n%s", err, out)
	}

	out, err = c.run(t, "operations", "list")
	if err != nil || !strings.Contains(out, "STATE") || strings.Index(out, fmt.Sprint(discardID)) > strings.Index(out, " replay ") {
		t.Fatalf("list, newest first %v:\n%s", err, out)
	}
	out, err = c.run(t, "operations", "list", "--state", "done", "--output", "json")
	var ops []Operation
	if err != nil || json.Unmarshal([]byte(out), &ops) != nil || len(ops) != 2 {
		t.Fatalf("list --state done %v:\n%s", err, out)
	}
	_, err = c.run(t, "operations", "list", "--state", "finishd")
	apiError(t, err, 400, "invalid")
	_, err = c.run(t, "operations", "cancel", fmt.Sprint(opID))
	apiError(t, err, 409, "conflict")
	_, err = c.run(t, "operations", "watch", "99999999")
	apiError(t, err, 404, "not_found")

	// A canary that is cancelled instead of released.
	out, err = c.run(t, "replay", "--ids", fmt.Sprintf("%d,%d", ids[2], ids[3]), "--canary", "1")
	if err != nil {
		t.Fatal(err)
	}
	var canaryID int64
	if _, err := fmt.Sscanf(out, "Operation %d:", &canaryID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return c.count(t, `SELECT count(*) FROM operations WHERE id = $1 AND state = 'canary'`, canaryID) == 1
	})
	out, err = c.run(t, "operations", "cancel", fmt.Sprint(canaryID))
	if err != nil || !strings.Contains(out, fmt.Sprintf("Operation %d cancelled: cancelled, 1 of 2 letters done.", canaryID)) {
		t.Fatalf("cancel %v:\n%s", err, out)
	}
}

// TestFailingCanaryStops: when the canary's jobs fail again, --wait says
// which and why, exits non-zero, and the rest of the letters stay pending.
func TestFailingCanaryStops(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.letters(t, 6, "reports.build", fpReport, time.Now())
	out, err := c.run(t, "replay", "--group", fpReport, "--canary", "2", "--reason", "maybe fixed", "--wait", "--interval", "50ms")
	if err == nil || !strings.Contains(err.Error(), "2 of 2 jobs failed again") || !strings.Contains(err.Error(), "redrive operations cancel 1") {
		t.Fatalf("error %v; want the canary's failure and what to do\n%s", err, out)
	}
	if strings.Count(out, "failed again: ") != 2 || !strings.Contains(out, "template reports/q3.tmpl not found") {
		t.Fatalf("the failed jobs and their errors should be listed:\n%s", out)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE fingerprint = $1 AND status = 'pending' AND replay_of IS NULL`, fpReport); n != 4 {
		t.Fatalf("%d letters left pending; want the 4 beyond the canary", n)
	}
}

// TestWaitFollowsReplaysToTheirOutcome: --wait returns once every replay
// has run, and says how many died again; the plain lines show both phases.
func TestWaitFollowsReplaysToTheirOutcome(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.letters(t, 3, "reports.build", fpReport, time.Now())
	c.letters(t, 2, "billing.charge", fpCard, time.Now())
	out, err := c.run(t, "replay", "--filter", "since=1h", "--wait", "--interval", "50ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "Operation 1 done: 5 of 5 letters replayed, 0 skipped (no longer pending); replays: 2 succeeded, 3 died again") {
		t.Fatalf("no settled summary:\n%s", out)
	}
	if !strings.Contains(out, "; replays: ") || !strings.Contains(out, "settled (") {
		t.Fatalf("no plain line with the replays:\n%s", out)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE replay_of IS NOT NULL AND status = 'pending'`); n != 3 {
		t.Fatalf("%d new letters, want the 3 that died again", n)
	}
}

// TestProgressBarOnATerminal: on a terminal --wait draws a bar that ends
// full, instead of a line per change.
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.letters(t, 5, "billing.charge", fpCard, time.Now())
	out, err := c.runWith(t, c.token, true, "replay", "--group", fpCard, "--wait", "--interval", "50ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "100%") || !strings.Contains(out, "(5/5") || !strings.Contains(out, "\r") {
		t.Fatalf("no progress bar:\n%q", out)
	}
	if strings.Contains(out, "operation 1 running:") {
		t.Fatalf("plain progress lines on a terminal:\n%s", out)
	}
	if !strings.Contains(out, "Operation 1 done: 5 of 5 letters replayed") {
		t.Fatalf("no summary:\n%s", out)
	}
	// The second bar: drawn below the first once the letters are handed
	// over (redrawn in place while both move, which a fast run skips).
	if !regexp.MustCompile(`replays settled: 5 succeeded, 0 died again.*\|█+\| \(5/5\)`).MatchString(out) {
		t.Fatalf("no second bar for the replays:\n%q", out)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	storetest.WaitFor(t, 10*time.Second, "the condition", cond)
}

// The sources, as an on-call engineer lists them: Redrive's own queue
// first, then each other, and a River source whose import is failing says
// so.
func TestSources(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	ctx := context.Background()
	if err := c.store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}, {Name: "shop", Kind: dlq.SourceKindRiver}}); err != nil {
		t.Fatal(err)
	}
	if err := c.store.Sources.ImportFailed(ctx, "shop", "river source shop: list discarded jobs: connection refused"); err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, "sources")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SOURCE") || !strings.HasPrefix(lines[1], "redrive") ||
		!strings.HasPrefix(lines[2], "legacy") || !strings.Contains(lines[3], "import failing: river source shop") {
		t.Errorf("sources:\n%s", out)
	}
	out, err = c.run(t, "sources", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var srcs []Source
	if err := json.Unmarshal([]byte(out), &srcs); err != nil || len(srcs) != 3 || srcs[2].Kind != "river" || srcs[2].LastError == nil ||
		srcs[1].CanReplay || srcs[1].NoReplay == "" {
		t.Errorf("sources as JSON: %+v (err %v)", srcs, err)
	}
}

// The list and the bulk commands take the search box's qualifiers on the
// arguments in --q and --filter q=..., and an unreadable one comes back
// as the API's 400 naming the problem.
func TestArgumentQueries(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	var de []int64
	for i, country := range []string{"DE", "FR", "DE", "US"} {
		id := storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{JobID: int64(2000000 + i), Task: "billing.charge", Fingerprint: fpCard,
			Kwargs: fmt.Sprintf(`{"country": %q, "amount": %d}`, country, 100*(i+1))})
		if country == "DE" {
			de = append(de, id)
		}
	}
	out, err := c.run(t, "letters", "list", "--q", "kwargs.country:DE", "--output", "json")
	if err != nil || strings.Count(out, `"country": "DE"`) != 2 || strings.Contains(out, `"FR"`) {
		t.Fatalf("letters list --q kwargs.country:DE: %v\n%s", err, out)
	}
	out, err = c.run(t, "discard", "--filter", "q=kwargs.country:DE and kwargs.amount>200", "--reason", "German test orders", "--wait", "--interval", "50ms")
	if err != nil {
		t.Fatalf("discard by qualifiers: %v\n%s", err, out)
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`); n != 1 {
		t.Fatalf("%d letters discarded, want 1 (letter %d)", n, de[1])
	}
	if n := c.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'discarded' AND id = $1`, de[1]); n != 1 {
		t.Fatalf("the wrong letter was discarded")
	}
	_, err = c.run(t, "replay", "--filter", "q=kwargs.amount>lots", "--dry-run")
	if ae := apiError(t, err, 400, "invalid"); !strings.Contains(ae.Fields["filter.q"], "compares numbers") {
		t.Fatalf("the API should say what is wrong with filter.q: %v", err)
	}
}
