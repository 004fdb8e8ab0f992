package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/notify"
)

func TestMain(m *testing.M) { os.Exit(dlqtest.Main(m)) }

// receiver is a local webhook: it records every body and answers with what
// answer says for the n-th request (1-based).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		n := len(r.bodies)
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) received() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

func ok(int) int { return http.StatusOK }

type env struct {
	db    *dlqtest.DB
	store *dlq.Store
}

func setup(t *testing.T) env {
	db := dlqtest.NewDB(t)
	return env{db: db, store: dlq.NewStore(db.DB)}
}

// run starts a sender with fast timings until the test ends.
func (e env) run(t *testing.T, holder string, endpoints string, tweak func(*notify.Config)) {
	t.Helper()
	eps, err := notify.ParseEndpoints(endpoints)
	if err != nil {
		t.Fatal(err)
	}
	masker, err := mask.New(mask.DefaultKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := notify.Config{
		Store: e.store, Endpoints: eps, Masker: masker, PublicURL: "https://redrive.example.com/", Holder: holder,
		Interval: 20 * time.Millisecond, SpikeInterval: 20 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffCap: 40 * time.Millisecond,
		Client: &http.Client{Timeout: 300 * time.Millisecond},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e env) deliveries(t *testing.T) []dlq.NotificationDelivery {
	t.Helper()
	ds, err := e.store.NotificationDeliveries(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestNotifications(t *testing.T) {
	t.Parallel()

	// A new error group gives exactly one notification, with its masked
	// sample and a link to its letters; more letters of the group and a
	// group whose letters are old (seeded history) give none.
	t.Run("NewGroupIsAnnouncedOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		old := time.Now().Add(-48 * time.Hour)
		dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "billing.backfill", ErrorClass: "OldError", FailedAt: old})
		fp := dlq.Fingerprint("payments.charge", "CardDeclined", "card declined for hunter2")
		for range 3 {
			dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "payments.charge", ErrorClass: "CardDeclined",
				Message: "card declined for hunter2", Kwargs: `{"password": "hunter2"}`, Fingerprint: fp})
		}
		e.run(t, "console-1", r.URL, nil)
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) >= 1 })
		time.Sleep(300 * time.Millisecond) // several more sender passes
		got := r.received()
		if len(got) != 1 {
			t.Fatalf("%d notifications, want 1: %s", len(got), got)
		}
		var m notify.Message
		if err := json.Unmarshal(got[0], &m); err != nil {
			t.Fatalf("body %s: %v", got[0], err)
		}
		if m.Event != dlq.NotifyGroupNew || m.ID == 0 || !strings.Contains(m.Title, "CardDeclined") ||
			!strings.Contains(m.Title, "payments.charge") {
			t.Errorf("message %+v; want a group_new about CardDeclined in payments.charge, with an id", m)
		}
		if want := "https://redrive.example.com/groups/" + fp; m.URL != want {
			t.Errorf("link %q; want the group's page %s", m.URL, want)
		}
		if strings.Contains(string(got[0]), "hunter2") || !strings.Contains(m.Text, mask.Placeholder) {
			t.Errorf("text %q: the masked password must not be sent", m.Text)
		}
		if !strings.Contains(m.Text, "3 pending of 3") {
			t.Errorf("text %q; want the group's counts as they are now", m.Text)
		}
	})

	// A receiver that fails twice still receives the notification once it
	// answers: three requests in all, one delivery, recorded as such.
	t.Run("AFailingReceiverGetsItOnceItAnswers", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, func(n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		e.run(t, "console-1", r.URL, nil)
		dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "mail.send", ErrorClass: "SMTPError"})
		waitFor(t, 10*time.Second, "the delivery", func() bool {
			ds := e.deliveries(t)
			return len(ds) == 1 && ds[0].State == dlq.DeliveryDelivered
		})
		time.Sleep(200 * time.Millisecond)
		if got := r.received(); len(got) != 3 {
			t.Errorf("%d requests, want 3 (two refused, one delivered)", len(got))
		}
		if d := e.deliveries(t)[0]; d.Attempts != 3 || d.DeliveredAt == nil || d.LastStatus == nil || *d.LastStatus != 204 {
			t.Errorf("delivery %+v; want delivered on attempt 3 with status 204", d)
		}
	})

	// A receiver that never answers in time is given up after the cap, and
	// the delivery says so, with the error, for the admin page.
	t.Run("AReceiverThatNeverAnswersIsGivenUpVisibly", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		hang := make(chan struct{})
		r := newReceiver(t, func(int) int { <-hang; return http.StatusOK })
		t.Cleanup(func() { close(hang) }) // before the receiver closes, which waits for its handlers
		secret := "/services/T0001/B0001/secret-token"
		e.run(t, "console-1", r.URL+secret, func(c *notify.Config) {
			c.MaxAttempts = 3
			c.Client = &http.Client{Timeout: 50 * time.Millisecond}
		})
		dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "mail.send", ErrorClass: "SMTPError"})
		waitFor(t, 10*time.Second, "the delivery to be given up", func() bool {
			ds := e.deliveries(t)
			return len(ds) == 1 && ds[0].State == dlq.DeliveryFailed
		})
		d := e.deliveries(t)[0]
		if d.Attempts != 3 || !strings.Contains(d.LastError, "Timeout") {
			t.Errorf("delivery %+v; want given up after 3 attempts, saying it timed out", d)
		}
		if strings.Contains(d.LastError, "secret-token") || strings.Contains(d.Endpoint, "secret-token") {
			t.Errorf("delivery %+v quotes the webhook URL, a secret", d)
		}
	})

	// Two console instances: one sends, so each event goes out once.
	t.Run("OneSenderAtATime", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.run(t, "console-1", r.URL, nil)
		e.run(t, "console-2", r.URL, nil)
		for i := range 5 {
			class := fmt.Sprintf("Error%d", i)
			dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "mail.send", ErrorClass: class,
				Fingerprint: dlq.Fingerprint("mail.send", class, "boom")})
		}
		waitFor(t, 10*time.Second, "5 notifications", func() bool { return len(r.received()) >= 5 })
		time.Sleep(300 * time.Millisecond)
		if got := r.received(); len(got) != 5 {
			t.Errorf("%d notifications for 5 new groups, want 5", len(got))
		}
	})

	// A Slack endpoint gets Slack's body, escaped, with the link.
	t.Run("SlackBody", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.run(t, "console-1", "slack:"+r.URL, nil)
		dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "mail.send", ErrorClass: "SMTPError", Message: "a <b> & c"})
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) == 1 })
		var body map[string]string
		if err := json.Unmarshal(r.received()[0], &body); err != nil {
			t.Fatal(err)
		}
		if text := body["text"]; len(body) != 1 || !strings.HasPrefix(text, "*New error group: SMTPError in mail.send*") ||
			!strings.Contains(text, "a &lt;b&gt; &amp; c") || !strings.Contains(text, "|Open in Redrive>") {
			t.Errorf("slack body %v", body)
		}
	})

	// A group spiking past the threshold is announced once while it lasts.
	t.Run("SpikeIsAnnouncedOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		// The group exists already (announced long ago): only the spike is new.
		dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "search.index", ErrorClass: "Timeout",
			FailedAt: time.Now().Add(-3 * time.Hour)})
		for range 5 {
			dlqtest.InsertDeadLetter(t, e.db.DB, dlqtest.Letter{Task: "search.index", ErrorClass: "Timeout"})
		}
		e.run(t, "console-1", r.URL, func(c *notify.Config) { c.Spike = dlq.Spike{Threshold: 4, Window: time.Minute} })
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) >= 1 })
		time.Sleep(300 * time.Millisecond)
		got := r.received()
		if len(got) != 1 {
			t.Fatalf("%d notifications, want 1: %s", len(got), got)
		}
		var m notify.Message
		_ = json.Unmarshal(got[0], &m)
		if m.Event != dlq.NotifyGroupSpike || !strings.Contains(m.Title, "5 letters in 1m0s") {
			t.Errorf("message %+v; want a spike of 5 letters in 1m0s", m)
		}
	})

	// A bulk operation that ends is announced, with its outcome.
	t.Run("OperationEndIsAnnounced", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.run(t, "console-1", r.URL, nil)
		var id int64
		if err := e.db.Get(&id, `INSERT INTO operations (kind, actor, reason, ids, max_id, matched)
			VALUES ('replay', 'alice', 'fix shipped', '{1,2}', 2, 2) RETURNING id`); err != nil {
			t.Fatal(err)
		}
		e.db.MustExec(`UPDATE operations SET state = 'done', done_count = 2, finished_at = now() WHERE id = $1`, id)
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) == 1 })
		var m notify.Message
		_ = json.Unmarshal(r.received()[0], &m)
		if m.Event != dlq.NotifyOperationDone || !strings.Contains(m.Title, "Bulk replay") || !strings.Contains(m.Title, "finished") ||
			!strings.Contains(m.Text, "2 of 2") || !strings.HasSuffix(m.URL, fmt.Sprintf("/operations/%d", id)) {
			t.Errorf("message %+v", m)
		}
	})

	// A bulk replay is announced when it really ends, once its replays
	// settled, not when its letters were handed to the queue; the
	// died-again guard's pause is announced as auto-paused.
	t.Run("ReplayEndsWhenSettledAndAutoPauseIsAnnounced", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.run(t, "console-1", r.URL, nil)
		var paused, settled int64
		if err := e.db.Get(&paused, `INSERT INTO operations (kind, actor, reason, ids, max_id, matched, died_again_percent, replays)
			VALUES ('replay', 'alice', 'fix shipped', '{1,2}', 2, 2000, 20, '{"waiting": 1500, "running": 0, "succeeded": 70, "died_again": 30}')
			RETURNING id`); err != nil {
			t.Fatal(err)
		}
		if err := e.db.Get(&settled, `INSERT INTO operations (kind, actor, ids, max_id, matched)
			VALUES ('replay', 'bob', '{3}', 3, 1) RETURNING id`); err != nil {
			t.Fatal(err)
		}
		e.db.MustExec(`UPDATE operations SET state = 'auto_paused', done_count = 500, guard_verdict = 'tripped' WHERE id = $1`, paused)
		e.db.MustExec(`UPDATE operations SET state = 'settling', done_count = 1 WHERE id = $1`, settled)
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) == 1 })
		time.Sleep(300 * time.Millisecond)
		if n := len(r.received()); n != 1 {
			t.Fatalf("%d notifications; settling is not an end", n)
		}
		var m notify.Message
		_ = json.Unmarshal(r.received()[0], &m)
		if m.Event != dlq.NotifyOperationAutoPaused || !strings.Contains(m.Title, "auto-paused") ||
			!strings.Contains(m.Text, "30 died again") || !strings.Contains(m.Text, "More than 20%") {
			t.Errorf("message %+v", m)
		}
		e.db.MustExec(`UPDATE operations SET state = 'done', finished_at = now() WHERE id = $1`, settled)
		waitFor(t, 10*time.Second, "the end", func() bool { return len(r.received()) == 2 })
		_ = json.Unmarshal(r.received()[1], &m)
		if m.Event != dlq.NotifyOperationDone || !strings.Contains(m.Title, fmt.Sprintf("#%d finished", settled)) {
			t.Errorf("message %+v", m)
		}
	})

	// A pause that begins, and one that expires by itself, are announced;
	// a resume by hand is the operator's own doing and is not.
	t.Run("PauseBeganAndExpiredAreAnnounced", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.run(t, "console-1", r.URL, nil)
		var expiring, manual int64
		if err := e.db.Get(&expiring, `INSERT INTO pauses (kind, name, reason, paused_by, until)
			VALUES ('task', 'payments.charge', 'provider down', 'olga', now() + interval '1 hour') RETURNING id`); err != nil {
			t.Fatal(err)
		}
		if err := e.db.Get(&manual, `INSERT INTO pauses (kind, name, reason, paused_by)
			VALUES ('queue', 'emails', 'smtp relay down', 'olga') RETURNING id`); err != nil {
			t.Fatal(err)
		}
		e.db.MustExec(`UPDATE pauses SET resumed_at = now(), resumed_by = 'expiry', expired = true WHERE id = $1`, expiring)
		e.db.MustExec(`UPDATE pauses SET resumed_at = now(), resumed_by = 'olga' WHERE id = $1`, manual)
		waitFor(t, 10*time.Second, "three notifications", func() bool { return len(r.received()) >= 3 })
		time.Sleep(300 * time.Millisecond)
		var titles []string
		for _, b := range r.received() {
			var m notify.Message
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(m.URL, "/pauses") {
				t.Errorf("link %q; want the pauses page", m.URL)
			}
			titles = append(titles, m.Event+": "+m.Title)
		}
		want := []string{
			"pause_began: Paused: task payments.charge, by olga",
			"pause_began: Paused: queue emails, by olga",
			"pause_expired: Pause expired: task payments.charge runs again",
		}
		if strings.Join(titles, "\n") != strings.Join(want, "\n") {
			t.Errorf("notifications:\n%s\nwant:\n%s", strings.Join(titles, "\n"), strings.Join(want, "\n"))
		}
	})
}
