package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// keyError is the poison payload's failure: a charge without its
// customer_id, which no retry will fix.
type keyError struct{ key string }

func (e *keyError) Error() string      { return fmt.Sprintf("'%s'", e.key) }
func (e *keyError) ErrorClass() string { return "KeyError" }

// webhookMessage is the JSON body docs/incident.md documents for a webhook
// (notify.Message, read as a receiver reads it: by its wire format).
type webhookMessage struct {
	ID    int64  `json:"id"`
	Event string `json:"event"`
	Title string `json:"title"`
	Text  string `json:"text"`
	URL   string `json:"url"`
}

// webhookReceiver is the on-call's chat hook: it keeps every message the
// console posts to it.
type webhookReceiver struct {
	mu   sync.Mutex
	got  []webhookMessage
	seen chan struct{} // a message arrived
}

func (h *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m webhookMessage
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.got = append(h.got, m)
	h.mu.Unlock()
	select {
	case h.seen <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// await returns the first message of event, waiting at most within.
func (h *webhookReceiver) await(t *testing.T, event string, within time.Duration) webhookMessage {
	t.Helper()
	deadline := time.After(within)
	for {
		h.mu.Lock()
		for _, m := range h.got {
			if m.Event == event {
				h.mu.Unlock()
				return m
			}
		}
		h.mu.Unlock()
		select {
		case <-h.seen:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no %s notification within %s; got %+v", event, within, h.got)
		}
	}
}

// TestIncidentJourney is docs/incident.md's walk-through, end to end,
// with a real worker running: a poison payload starts failing billing.charge
// and a new error group appears; the on-call's webhook hears of it within
// a minute and links to the group; from the group's page the task is
// paused in two clicks with a reason and an expiry; every page shows the
// banner; new charges wait while the other task on the queue keeps
// running; the retrying poison job is killed to the dead letters from its
// page; the resume lets the waiting charges run.
func TestIncidentJourney(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	hooks := &webhookReceiver{seen: make(chan struct{}, 1)}
	receiver := httptest.NewServer(hooks)
	t.Cleanup(receiver.Close)
	ln := listenLocal(t)
	base := "http://" + ln.Addr().String()
	serveConsoleOn(t, ln, redrive.ConsoleConfig{DB: store.DB, Logger: logger, Version: "e2e",
		Notify: redrive.NotifyConfig{WebhookURLs: receiver.URL + "/hooks/T0ONCALL", PublicURL: base, NewGroupGather: 100 * time.Millisecond}})

	// The worker, as `redrive worker` runs one: billing.charge fails on a
	// charge without customer_id and succeeds otherwise; emails.send, on
	// the same queue, always succeeds. Retries come quickly, so the poison
	// job builds up a history before anyone acts.
	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(_ context.Context, j *worker.Job) error {
		var kw map[string]any
		if err := json.Unmarshal(j.Kwargs, &kw); err != nil {
			return worker.Permanent(err)
		}
		if kw["customer_id"] == nil {
			return &keyError{key: "customer_id"}
		}
		return nil
	}, worker.TaskOptions{Timeout: 10 * time.Second})
	reg.Register("emails.send", func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
	wctx, stopWorker := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		stopped <- redrive.RunWorker(wctx, store.DB, worker.Config{Registry: reg, Queues: []string{"default"}, Concurrency: 4,
			PollInterval: 100 * time.Millisecond, ListenDSN: db.DSN, Logger: logger, ShutdownGrace: 5 * time.Second,
			RetryPolicy: worker.RetryPolicy{Base: 300 * time.Millisecond, Cap: 2 * time.Second, RandFunc: func() float64 { return 1 }}})
	}()
	t.Cleanup(func() {
		stopWorker()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	must(t, store.Queue.RegisterTasks(ctx, []string{"billing.charge", "emails.send"}))
	enqueue := func(task string, kwargs string, maxAttempts int) int64 {
		t.Helper()
		res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: task, Queue: "default", Kwargs: json.RawMessage(kwargs), MaxAttempts: maxAttempts})
		must(t, err)
		return res.Job.ID
	}

	// 1. The poison payload arrives: two charges die at once (one attempt
	// each), and one keeps retrying, up to 100 attempts.
	start := time.Now()
	enqueue("billing.charge", `{"order": "ORD-1001"}`, 1)
	enqueue("billing.charge", `{"order": "ORD-1002"}`, 1)
	poison := enqueue("billing.charge", `{"order": "ORD-1003"}`, 100)

	// 2. The webhook hears of the new group within a minute, with a link
	// to the console page where the on-call acts.
	msg := hooks.await(t, dlq.NotifyGroupNew, time.Minute)
	t.Logf("new-group notification %s after the first failure: %q -> %s", time.Since(start).Round(time.Millisecond), msg.Title, msg.URL)
	if msg.Title != "New error group: KeyError in billing.charge" {
		t.Errorf("notification title %q", msg.Title)
	}
	if !strings.Contains(msg.Text, "'customer_id'") {
		t.Errorf("notification text %q lacks the error", msg.Text)
	}
	var fingerprint string
	must(t, db.Get(&fingerprint, `SELECT fingerprint FROM error_groups WHERE task = 'billing.charge'`))
	if want := base + "/groups/" + fingerprint; msg.URL != want {
		t.Errorf("notification links to %s, want the group's page %s", msg.URL, want)
	}

	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err := page.Goto(msg.URL)
	must(t, err)
	must(t, expect.Locator(byTestID(page, "group-title")).ToContainText("KeyError in billing.charge"))
	must(t, expect.Locator(byTestID(page, "group-message")).ToHaveText("'customer_id'"))
	screenshot(t, page, "incident-1-group-from-webhook")

	// 3. Two clicks: "Pause task", then "Pause task billing.charge", with
	// the reason and the expiry filled in between.
	must(t, page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Pause task"}).Click())
	must(t, expect.Page(page).ToHaveURL(base+"/pauses/new?task=billing.charge"))
	const why = "poison payload: charges without customer_id (INC-4711)"
	must(t, page.GetByLabel("Why").Fill(why))
	_, err = page.GetByLabel("For").SelectOption(playwright.SelectOptionValues{Values: &[]string{"2h"}})
	must(t, err)
	screenshot(t, page, "incident-2-pause-form")
	must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Pause task billing.charge"}).Click())
	must(t, expect.Locator(byTestID(page, "flash")).ToContainText("Paused task billing.charge"))

	// 4. The banner, on every page: what, who, since, why, until.
	for _, path := range []string{"/", "/dead-letters", "/jobs"} {
		_, err := page.Goto(base + path)
		must(t, err)
		banner := byTestID(page, "pause-banner")
		must(t, expect.Locator(banner).ToContainText("Paused: task billing.charge"))
		must(t, expect.Locator(banner.Locator(`[data-testid="pause-by"]`)).ToHaveText("olga"))
		must(t, expect.Locator(banner).ToContainText(regexp.MustCompile(`since \d{4}-\d\d-\d\d \d\d:\d\d`)))
		must(t, expect.Locator(banner.Locator(`[data-testid="pause-reason"]`)).ToHaveText(why))
		must(t, expect.Locator(banner.Locator(`[data-testid="pause-until"]`)).ToContainText("UTC"))
		must(t, expect.Locator(banner).ToContainText(regexp.MustCompile(`in (2 h|1 h 59 min|119 min|120 min)`)))
		screenshot(t, page, "incident-3-banner-"+map[string]string{"/": "overview", "/dead-letters": "dead-letters", "/jobs": "jobs"}[path])
	}

	// 5. New charges wait; the other task on the same queue keeps running.
	// The emails are enqueued after the charges: running them means the
	// worker claimed past the held charges.
	var waiting []int64
	for i := range 3 {
		waiting = append(waiting, enqueue("billing.charge", fmt.Sprintf(`{"order": "ORD-20%02d", "customer_id": "cus_%d"}`, i, 42+i), 5))
	}
	for i := range 3 {
		enqueue("emails.send", fmt.Sprintf(`{"to": "ops+%d@example.com"}`, i), 3)
	}
	waitFor(t, "the emails to run past the held charges", func() bool {
		return countRows(t, db, `SELECT count(*) FROM jobs WHERE task = 'emails.send' AND state = 'succeeded'`) == 3
	})
	if n := countRows(t, db, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'available' AND attempt = 0`, pq.Array(waiting)); n != 3 {
		t.Fatalf("%d of the 3 new charges are still waiting untouched, want all 3", n)
	}
	_, err = page.Goto(base + "/jobs?task=billing.charge&state=available")
	must(t, err)
	must(t, expect.Locator(byTestID(page, "job-row")).ToHaveCount(3))
	must(t, expect.Locator(byTestID(page, "jobs")).ToContainText("available"))
	must(t, expect.Locator(byTestID(page, "job-row").First()).ToContainText("held (task paused)"))
	screenshot(t, page, "incident-4-charges-waiting")
	_, err = page.Goto(base + "/jobs?task=emails.send")
	must(t, err)
	must(t, expect.Locator(byTestID(page, "job-row")).ToHaveCount(3))
	must(t, expect.Locator(byTestID(page, "jobs")).ToContainText("succeeded"))
	screenshot(t, page, "incident-5-emails-ran")

	// 6. The poison job is held too, between two attempts (an attempt
	// under way when the pause began may end first). Kill it from its page.
	var attempts int
	waitFor(t, "the poison job to rest between attempts", func() bool {
		var state dlq.State
		must(t, db.QueryRow(`SELECT state, attempt FROM jobs WHERE id = $1`, poison).Scan(&state, &attempts))
		return state == dlq.StateRetrying
	})
	if attempts < 2 {
		t.Logf("the poison job had only %d attempt(s) before the pause", attempts)
	}
	_, err = page.Goto(fmt.Sprintf("%s/jobs/%d", base, poison))
	must(t, err)
	must(t, expect.Locator(byTestID(page, "kill")).ToBeVisible())
	// Its page says why no worker takes it, not that it waits for one.
	must(t, expect.Locator(byTestID(page, "job-run-at")).ToContainText("held while task billing.charge is paused"))
	screenshot(t, page, "incident-6-poison-job")
	const killWhy = "poison payload: no customer_id, fix in PR 812"
	must(t, byTestID(page, "kill-reason").Fill(killWhy))
	must(t, byTestID(page, "kill").Click())
	must(t, expect.Locator(byTestID(page, "dead-letter-link")).ToBeVisible())
	must(t, byTestID(page, "dead-letter-link").GetByRole("link").Click())
	must(t, expect.Locator(byTestID(page, "why")).ToContainText(fmt.Sprintf("Killed by an operator after %d/100 attempts", attempts)))
	must(t, expect.Locator(page.Locator(`[data-testid="facts"] dt:text-is("Reason") + dd`)).ToHaveText("killed"))
	must(t, expect.Locator(page.Locator("body")).ToContainText("killed by olga: "+killWhy))
	// Its history: every attempt it failed, then the kill.
	must(t, expect.Locator(byTestID(page, "attempt")).ToHaveCount(attempts+1))
	must(t, expect.Locator(byTestID(page, "attempt").Last()).ToContainText(fmt.Sprintf("After attempt %d", attempts)))
	must(t, expect.Locator(byTestID(page, "attempts")).ToContainText("KeyError"))
	screenshot(t, page, "incident-7-killed-letter")

	// 7. Resume from the banner: the waiting charges run.
	_, err = page.Goto(base + "/jobs?task=billing.charge")
	must(t, err)
	must(t, byTestID(page, "pause-banner").GetByRole("button", playwright.LocatorGetByRoleOptions{Name: "Resume task"}).Click())
	must(t, expect.Locator(byTestID(page, "flash")).ToContainText("Resumed task billing.charge"))
	must(t, expect.Locator(byTestID(page, "pause-banner")).ToHaveCount(0))
	waitFor(t, "the held charges to run after the resume", func() bool {
		return countRows(t, db, `SELECT count(*) FROM jobs WHERE id = ANY($1) AND state = 'succeeded'`, pq.Array(waiting)) == 3
	})
	_, err = page.Goto(base + "/jobs?task=billing.charge&state=succeeded")
	must(t, err)
	must(t, expect.Locator(byTestID(page, "job-row")).ToHaveCount(3))
	screenshot(t, page, "incident-8-resumed")
	if n := countRows(t, db, `SELECT count(*) FROM audit_events WHERE action IN ('pause', 'resume', 'job_kill')`); n != 3 {
		t.Errorf("%d audit entries, want the pause, the kill and the resume", n)
	}
}

// waitFor polls cond until it holds, for at most 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	storetest.WaitFor(t, 30*time.Second, what, cond)
}
