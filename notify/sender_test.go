package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// receiver is a local webhook: it records every body and answers with what
// answer says for the n-th request (1-based).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	times  []time.Time // when each body came
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.times = append(r.times, time.Now())
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

// arrivals returns when each body came.
func (r *receiver) arrivals() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.times...)
}

// messages decodes every JSON body received.
func (r *receiver) messages(t *testing.T) []notify.Message {
	t.Helper()
	var ms []notify.Message
	for _, b := range r.received() {
		var m notify.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		ms = append(ms, m)
	}
	return ms
}

func ok(int) int { return http.StatusOK }

// newGroups inserts one letter of each of n new error groups of task,
// classes prefix0, prefix1, …, and returns their fingerprints.
func (e env) newGroups(t *testing.T, task, prefix string, n int) []string {
	t.Helper()
	var fps, classes []string
	for i := range n {
		class := fmt.Sprintf("%s%d", prefix, i)
		classes, fps = append(classes, class), append(fps, storetest.GroupID(task, class, "boom"))
	}
	// One transaction: the groups of a burst are new together, so a
	// sender pass never sees part of them.
	tx, err := e.db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range fps {
		_, err := tx.Exec(`
			INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
				attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at)
			SELECT coalesce(max(job_id), 0) + 1, 'default', $1, '[1]', '{}', $2, 'boom', '', 5, 5, '[]', 'exhausted',
				$3, '', now() - interval '1 minute', now()
			FROM dead_letter_records`, task, classes[i], fps[i])
		if err != nil {
			t.Fatalf("insert new group: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return fps
}

// announced is the fingerprints of the groups m announces: a digest's
// facts list them; a single group's message links to its page.
func announced(t *testing.T, m notify.Message) []string {
	t.Helper()
	switch m.Event {
	case dlq.NotifyGroupNew:
		return []string{m.URL[strings.LastIndex(m.URL, "/")+1:]}
	case dlq.NotifyGroupNewDigest:
		var facts struct {
			Count  int `json:"count"`
			Groups []struct {
				Fingerprint string `json:"fingerprint"`
			} `json:"groups"`
		}
		if err := json.Unmarshal(m.Facts, &facts); err != nil {
			t.Fatalf("digest facts %s: %v", m.Facts, err)
		}
		var fps []string
		for _, g := range facts.Groups {
			fps = append(fps, g.Fingerprint)
		}
		if facts.Count != len(fps) {
			t.Fatalf("digest facts %s: count %d, %d groups", m.Facts, facts.Count, len(fps))
		}
		return fps
	}
	return nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

type env struct {
	db    *storetest.DB
	store *storetest.Stores
	// passes counts the passes the test's senders made under the lease.
	passes *atomic.Int64
}

func setup(t *testing.T) env {
	db := storetest.NewDB(t)
	return env{db: db, store: storetest.NewStores(db.DB), passes: new(atomic.Int64)}
}

// settled waits until the senders have made quietPasses more passes: all
// that was due has been sent by then, so a count read after it is final
// (the fast backoff's cap is shorter than these passes).
func (e env) settled(t *testing.T) {
	t.Helper()
	until := e.passes.Load() + quietPasses
	waitFor(t, 10*time.Second, "the sender's passes", func() bool { return e.passes.Load() >= until })
}

const quietPasses = 5

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
		Outbox: e.store.Outbox, Groups: e.store.Groups, Operations: e.store.Operations, Pauses: e.store.Queue, Endpoints: eps, Masker: masker, PublicURL: "https://redrive.example.com/", Holder: holder,
		Interval: 20 * time.Millisecond, SpikeInterval: 20 * time.Millisecond, NewGroupGather: time.Millisecond,
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
	notify.SetAfterPass(s, func() { e.passes.Add(1) })
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
	storetest.WaitFor(t, timeout, what, cond)
}

func (e env) deliveries(t *testing.T) []dlq.NotificationDelivery {
	t.Helper()
	ds, err := e.store.Outbox.NotificationDeliveries(context.Background(), 100)
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
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "billing.backfill", ErrorClass: "OldError", FailedAt: old})
		fp := storetest.GroupID("payments.charge", "CardDeclined", "card declined for hunter2")
		for range 3 {
			storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "payments.charge", ErrorClass: "CardDeclined",
				Message: "card declined for hunter2", Kwargs: `{"password": "hunter2"}`, Fingerprint: fp})
		}
		e.run(t, "console-1", r.URL, nil)
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) >= 1 })
		e.settled(t)
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
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "mail.send", ErrorClass: "SMTPError"})
		waitFor(t, 10*time.Second, "the delivery", func() bool {
			ds := e.deliveries(t)
			return len(ds) == 1 && ds[0].State == dlq.DeliveryDelivered
		})
		e.settled(t)
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
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "mail.send", ErrorClass: "SMTPError"})
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

	// Two console instances: one sends, so each event goes out once; and
	// a burst of new groups is one message, a digest listing them, each
	// linked to its page.
	t.Run("OneSenderAtATime", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		fps := e.newGroups(t, "mail.send", "Error", 5)
		e.run(t, "console-1", r.URL, nil)
		e.run(t, "console-2", r.URL, nil)
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) >= 1 })
		e.settled(t)
		ms := r.messages(t)
		if len(ms) != 1 {
			t.Fatalf("%d notifications for 5 new groups, want 1 digest: %+v", len(ms), ms)
		}
		m := ms[0]
		if m.Event != dlq.NotifyGroupNewDigest || m.Title != "5 new error groups in the last minute" ||
			m.URL != "https://redrive.example.com/groups?sort=newest" || !sameSet(announced(t, m), fps) {
			t.Errorf("message %+v; want a digest of the 5 groups", m)
		}
		if len(m.Links) != 5 {
			t.Fatalf("links %+v; want one per group", m.Links)
		}
		for i, l := range m.Links {
			if want := "https://redrive.example.com/groups/" + fps[i]; l.URL != want ||
				l.Text != fmt.Sprintf("mail.send Error%d (1 pending)", i) || !strings.Contains(m.Text, l.Text) {
				t.Errorf("line %d: %+v; want mail.send Error%d (1 pending), linked to %s, in the text %q", i, l, i, want, m.Text)
			}
		}
	})

	// An outage failing two tasks the same way is one incident: its new
	// groups are one digest, named as the incident and linked to its page.
	t.Run("AnIncidentIsAnnouncedAsOne", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		tx, err := e.db.Beginx()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var fps []string
		for _, task := range []string{"payments.charge", "payments.refund"} {
			fp := storetest.GroupID(task, "ServiceUnavailable", "provider returned 503")
			fps = append(fps, fp)
			// The template the grouper keeps for the group (the tests of
			// notify do not import the grouper).
			if _, err := tx.Exec(`INSERT INTO error_templates (id, task, error_class, place, tokens, fixed, seq)
				SELECT $1, $2, 'ServiceUnavailable', '', w, array_fill(false, ARRAY[cardinality(w)]), nextval('error_templates_seq')
				FROM string_to_array('payments-provider returned 503 for request <*>', ' ') w`, fp, task); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := tx.Exec(`
					INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
						attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at)
					SELECT coalesce(max(job_id), 0) + 1, 'payments', $1, '[1]', '{}', 'ServiceUnavailable',
						'payments-provider returned 503 for request req_' || $3, '', 5, 5, '[]', 'exhausted', $2, '',
						now() - interval '1 minute', now()
					FROM dead_letter_records`, task, fp, fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		e.run(t, "console-1", r.URL, nil)
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) >= 1 })
		e.settled(t)
		ms := r.messages(t)
		if len(ms) != 1 {
			t.Fatalf("%d notifications for one outage in two tasks, want 1: %+v", len(ms), ms)
		}
		m := ms[0]
		oldest := slices.Min(fps)
		if !strings.HasPrefix(m.Title, "New incident: ServiceUnavailable in payments.charge, payments.refund (2 new error groups") ||
			!strings.HasPrefix(m.URL, "https://redrive.example.com/incidents/") || !sameSet(announced(t, m), fps) {
			t.Errorf("message %q at %s; want the incident of %v named and linked", m.Title, m.URL, fps)
		}
		var facts struct {
			Incident string `json:"incident"`
		}
		if err := json.Unmarshal(m.Facts, &facts); err != nil || !slices.Contains(fps, facts.Incident) {
			t.Errorf("facts %s name the incident %q (err %v); want one of its groups (%s first seen)", m.Facts, facts.Incident, err, oldest)
		}
	})

	// Many new groups: ten are listed, the rest counted and linked to the
	// groups page, newest first; the JSON facts name them all.
	t.Run("ABigDigestListsTenAndCountsTheRest", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		s := newReceiver(t, ok)
		fps := e.newGroups(t, "payments.charge", "ServiceUnavailable", 13)
		e.run(t, "console-1", r.URL+",slack:"+s.URL, nil)
		waitFor(t, 10*time.Second, "the digests", func() bool { return len(r.received()) >= 1 && len(s.received()) >= 1 })
		e.settled(t)
		ms := r.messages(t)
		if len(ms) != 1 || len(s.received()) != 1 {
			t.Fatalf("%d and %d notifications; want one digest each", len(ms), len(s.received()))
		}
		m := ms[0]
		if !strings.HasPrefix(m.Title, "13 new error groups") || !sameSet(announced(t, m), fps) || len(m.Links) != 11 {
			t.Fatalf("message %+v; want 13 groups, 10 lines and one more", m)
		}
		if l := m.Links[10]; l.Text != "and 3 more" || l.URL != "https://redrive.example.com/groups?sort=newest" {
			t.Errorf("last line %+v; want the other 3 counted, linked to the newest groups", l)
		}
		var body map[string]string
		if err := json.Unmarshal(s.received()[0], &body); err != nil {
			t.Fatal(err)
		}
		text := body["text"]
		for _, want := range []string{"*13 new error groups in the last minute*\n",
			"• <https://redrive.example.com/groups/" + fps[0] + "|payments.charge ServiceUnavailable0 (1 pending)>\n",
			"• <https://redrive.example.com/groups?sort=newest|and 3 more>\n"} {
			if !strings.Contains(text, want) {
				t.Errorf("slack text %q lacks %q", text, want)
			}
		}
		if strings.Contains(text, fps[10]) {
			t.Errorf("slack text %q lists the 11th group", text)
		}
	})

	// New groups found while an endpoint is inside its window are not
	// dropped, nor sent at once: they are listed in the next digest, a
	// window after the last.
	t.Run("GroupsWithinTheWindowGoInTheNextDigest", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		const window = 1500 * time.Millisecond
		burst := e.newGroups(t, "search.index", "Burst", 3)
		e.run(t, "console-1", r.URL, func(c *notify.Config) { c.NewGroupWindow = window })
		waitFor(t, 10*time.Second, "the first digest", func() bool { return len(r.received()) >= 1 })
		later := e.newGroups(t, "search.index", "Later", 2)
		e.settled(t) // passes within the window: the later groups wait
		if n := len(r.received()); n != 1 {
			t.Fatalf("%d notifications within the window; want the first digest only", n)
		}
		waitFor(t, 10*time.Second, "the second digest", func() bool { return len(r.received()) >= 2 })
		e.settled(t)
		ms, at := r.messages(t), r.arrivals()
		if len(ms) != 2 {
			t.Fatalf("%d notifications, want 2: %+v", len(ms), ms)
		}
		if !sameSet(announced(t, ms[0]), burst) || !sameSet(announced(t, ms[1]), later) {
			t.Errorf("digests of %v then %v; want %v then %v", announced(t, ms[0]), announced(t, ms[1]), burst, later)
		}
		if gap := at[1].Sub(at[0]); gap < window {
			t.Errorf("the second digest came %s after the first; want at least the window, %s", gap, window)
		}
		if ms[0].ID == ms[1].ID {
			t.Errorf("two digests with id %d", ms[0].ID)
		}
	})

	// Each endpoint has its own window and its own digest: one that
	// refuses does not hold up the other, and gets the same digest, whole
	// and under the same id, when it answers; a group found while the
	// digest is being tried goes in the next one, never in both.
	t.Run("EachEndpointItsOwnDigestRetriedWhole", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		good := newReceiver(t, ok)
		release := make(chan struct{})
		bad := newReceiver(t, func(n int) int {
			if n == 1 {
				<-release
			}
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		first := e.newGroups(t, "mail.send", "First", 3)
		e.run(t, "console-1", good.URL+","+bad.URL, func(c *notify.Config) {
			c.NewGroupWindow = 500 * time.Millisecond
			c.Client = &http.Client{Timeout: 10 * time.Second}
		})
		waitFor(t, 10*time.Second, "the bad endpoint's first post", func() bool { return len(bad.received()) >= 1 })
		// The bad endpoint's first post hangs: a group found now, while the
		// first digest is being tried.
		late := e.newGroups(t, "mail.send", "Late", 1)
		close(release)
		waitFor(t, 10*time.Second, "the late group on both endpoints", func() bool {
			return len(good.received()) >= 2 && len(bad.received()) >= 4
		})
		e.settled(t)
		g, b := good.messages(t), bad.messages(t)
		if len(g) != 2 {
			t.Fatalf("good endpoint: %d messages, want 2: %+v", len(g), g)
		}
		if len(b) != 4 {
			t.Fatalf("bad endpoint: %d requests, want 4 (the digest refused twice, then delivered; then the late group): %+v", len(b), b)
		}
		for i := 1; i < 3; i++ {
			if b[i].ID != b[0].ID || !sameSet(announced(t, b[i]), announced(t, b[0])) || b[i].Title != b[0].Title {
				t.Errorf("attempt %d: %+v; want the first digest again, whole: %+v", i+1, b[i], b[0])
			}
		}
		for name, ms := range map[string][]notify.Message{"good": g, "bad": {b[0], b[3]}} {
			if !sameSet(announced(t, ms[0]), first) || !sameSet(announced(t, ms[1]), late) || ms[1].Event != dlq.NotifyGroupNew {
				t.Errorf("%s endpoint: %v then %v (%s); want %v, then %v alone", name, announced(t, ms[0]),
					announced(t, ms[1]), ms[1].Event, first, late)
			}
		}
		var states []string
		for _, d := range e.deliveries(t) {
			states = append(states, d.State)
			if d.State != dlq.DeliveryDelivered || d.DigestID == nil {
				t.Errorf("delivery %+v; want delivered in a digest", d)
			}
		}
		if len(states) != 8 {
			t.Errorf("%d deliveries, want 4 groups × 2 endpoints", len(states))
		}
	})

	// A digest given up is shown failed, every group in it; new groups
	// after it go out in the next.
	t.Run("ADigestGivenUpFailsWhole", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		refuse := true
		var mu sync.Mutex
		r := newReceiver(t, func(int) int {
			mu.Lock()
			defer mu.Unlock()
			if refuse {
				return http.StatusBadRequest
			}
			return http.StatusOK
		})
		first := e.newGroups(t, "mail.send", "First", 2)
		e.run(t, "console-1", r.URL, func(c *notify.Config) {
			c.MaxAttempts = 2
			c.NewGroupWindow = 100 * time.Millisecond
		})
		waitFor(t, 10*time.Second, "the digest to be given up", func() bool {
			ds := e.deliveries(t)
			return len(ds) == 2 && ds[0].State == dlq.DeliveryFailed && ds[1].State == dlq.DeliveryFailed
		})
		mu.Lock()
		refuse = false
		mu.Unlock()
		next := e.newGroups(t, "mail.send", "Next", 2)
		waitFor(t, 10*time.Second, "the next digest", func() bool { return len(r.received()) >= 3 })
		e.settled(t)
		ms := r.messages(t)
		if len(ms) != 3 || ms[0].ID != ms[1].ID || !sameSet(announced(t, ms[1]), first) || !sameSet(announced(t, ms[2]), next) {
			t.Fatalf("messages %+v; want the first digest twice, then the next", ms)
		}
		for _, d := range e.deliveries(t) {
			if d.Attempts != map[string]int{dlq.DeliveryFailed: 2, dlq.DeliveryDelivered: 1}[d.State] {
				t.Errorf("delivery %+v", d)
			}
		}
	})

	// Other events are not held by the new groups' window: an operation
	// that ends while the window is closed is announced at once, alone.
	t.Run("OtherEventsAreNotHeldByTheWindow", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.newGroups(t, "mail.send", "Error", 2)
		e.run(t, "console-1", r.URL, func(c *notify.Config) { c.NewGroupWindow = time.Hour })
		waitFor(t, 10*time.Second, "the digest", func() bool { return len(r.received()) >= 1 })
		e.newGroups(t, "mail.send", "Later", 1)
		var id int64
		if err := e.db.Get(&id, `INSERT INTO operations (kind, actor, reason, ids, max_id, matched)
			VALUES ('replay', 'alice', 'fix shipped', '{1}', 1, 1) RETURNING id`); err != nil {
			t.Fatal(err)
		}
		e.db.MustExec(`UPDATE operations SET state = 'done', done_count = 1, finished_at = now() WHERE id = $1`, id)
		waitFor(t, 10*time.Second, "the operation's end", func() bool { return len(r.received()) >= 2 })
		e.settled(t)
		ms := r.messages(t)
		if len(ms) != 2 || ms[0].Event != dlq.NotifyGroupNewDigest || ms[1].Event != dlq.NotifyOperationDone {
			t.Fatalf("messages %+v; want the digest, then the operation's end, the later group waiting", ms)
		}
	})

	// A Slack endpoint gets Slack's body, escaped, with the link.
	t.Run("SlackBody", func(t *testing.T) {
		t.Parallel()
		e := setup(t)
		r := newReceiver(t, ok)
		e.run(t, "console-1", "slack:"+r.URL, nil)
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "mail.send", ErrorClass: "SMTPError", Message: "a <b> & c"})
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
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "search.index", ErrorClass: "Timeout",
			FailedAt: time.Now().Add(-3 * time.Hour)})
		for range 5 {
			storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "search.index", ErrorClass: "Timeout"})
		}
		e.run(t, "console-1", r.URL, func(c *notify.Config) { c.Spike = dlq.Spike{Threshold: 4, Window: time.Minute} })
		waitFor(t, 10*time.Second, "a notification", func() bool { return len(r.received()) >= 1 })
		e.settled(t)
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
		e.settled(t)
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
		e.settled(t)
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
