package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/storetest"
)

// digestEnv is a database with two webhooks, a and b, and helpers to make
// new error groups and move its notification clock.
type digestEnv struct {
	db    *storetest.DB
	store *storetest.Stores
	eps   []dlq.NotificationEndpoint
	n     int
}

func newDigestEnv(t *testing.T) *digestEnv {
	db := storetest.NewDB(t)
	return &digestEnv{db: db, store: storetest.NewStores(db.DB),
		eps: []dlq.NotificationEndpoint{{Hash: "a", Redacted: "json https://a.example/…"}, {Hash: "b", Redacted: "json https://b.example/…"}}}
}

// newGroups makes n new error groups and fans their events out, and
// returns the events' ids, oldest first.
func (e *digestEnv) newGroups(t *testing.T, n int) []int64 {
	t.Helper()
	var fps []string
	for range n {
		e.n++
		class := fmt.Sprintf("Error%d", e.n)
		fps = append(fps, storetest.GroupID("mail.send", class, "boom"))
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "mail.send", ErrorClass: class, Fingerprint: fps[len(fps)-1]})
	}
	e.fanOut(t)
	var ids []int64
	if err := e.db.Select(&ids, `SELECT id FROM notification_events WHERE kind = 'group_new' AND subject = ANY ($1) ORDER BY id`,
		pq.Array(fps)); err != nil {
		t.Fatal(err)
	}
	if len(ids) != n {
		t.Fatalf("%d group_new events for %d new groups", len(ids), n)
	}
	return ids
}

func (e *digestEnv) fanOut(t *testing.T) {
	t.Helper()
	if _, err := e.store.Outbox.FanOutNotifications(context.Background(), e.eps, 500); err != nil {
		t.Fatal(err)
	}
}

func (e *digestEnv) seal(t *testing.T) dlq.DigestSealing {
	t.Helper()
	r, err := e.store.Outbox.SealNewGroupDigests(context.Background(), dlq.DigestTiming{Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// due returns the due digests by endpoint.
func (e *digestEnv) due(t *testing.T) map[string]dlq.NewGroupDigest {
	t.Helper()
	ds, err := e.store.Outbox.DueDigests(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]dlq.NewGroupDigest{}
	for _, d := range ds {
		if _, dup := m[d.EndpointHash]; dup {
			t.Fatalf("two digests due for endpoint %s: %+v", d.EndpointHash, ds)
		}
		m[d.EndpointHash] = d
	}
	return m
}

func (e *digestEnv) record(t *testing.T, g dlq.NewGroupDigest, a dlq.DeliveryAttempt) {
	t.Helper()
	a.EventID, a.EndpointHash = g.ID, g.EndpointHash
	if err := e.store.Outbox.RecordDigestAttempt(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// passWindow moves the notification clock a window on: every window
// opened, and every wait, a minute and a second earlier.
func (e *digestEnv) passWindow(t *testing.T) {
	t.Helper()
	e.db.MustExec(`UPDATE notification_digest_windows SET opened_at = opened_at - interval '61 seconds'`)
	e.db.MustExec(`UPDATE notification_deliveries SET next_attempt_at = next_attempt_at - interval '61 seconds' WHERE state = 'pending'`)
}

// deliveryRow is one delivery as the tests check it.
type deliveryRow struct {
	EventID  int64  `db:"event_id"`
	Endpoint string `db:"endpoint_hash"`
	State    string `db:"state"`
	Attempts int    `db:"attempts"`
	DigestID *int64 `db:"digest_id"`
	// WaitS is how long until the next attempt, in seconds.
	WaitS float64 `db:"wait_s"`
}

func (e *digestEnv) deliveries(t *testing.T) map[string]deliveryRow {
	t.Helper()
	var rows []deliveryRow
	if err := e.db.Select(&rows, `SELECT event_id, endpoint_hash, state, attempts, digest_id,
		extract(epoch FROM next_attempt_at - now())::float8 AS wait_s FROM notification_deliveries`); err != nil {
		t.Fatal(err)
	}
	m := map[string]deliveryRow{}
	for _, r := range rows {
		m[fmt.Sprintf("%s/%d", r.Endpoint, r.EventID)] = r
	}
	return m
}

func eventIDs(g dlq.NewGroupDigest) []int64 {
	var ids []int64
	for _, ev := range g.Events {
		ids = append(ids, ev.ID)
	}
	return ids
}

func sameEventIDs(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// TestNotificationDigests: new error groups are announced in digests, at
// most one per endpoint per window, each group in exactly one digest per
// endpoint, and a digest is tried, retried and settled as a whole.
func TestNotificationDigests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// A burst is one digest per endpoint, holding every group, named by
	// its first event; the new groups are not among the deliveries sent
	// one by one. Read again (after a crash between reading and
	// recording), the digest is the same.
	t.Run("ABurstIsOneDigestPerEndpoint", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		ids := e.newGroups(t, 5)
		if r := e.seal(t); r != (dlq.DigestSealing{Digests: 2, Sealed: 10}) {
			t.Errorf("sealing %+v; want 2 digests of 5", r)
		}
		due := e.due(t)
		for _, ep := range []string{"a", "b"} {
			g := due[ep]
			if g.ID != ids[0] || !sameEventIDs(eventIDs(g), ids) || g.Attempts != 0 {
				t.Errorf("endpoint %s: digest %d of %v (%d attempts); want %d of %v", ep, g.ID, eventIDs(g), g.Attempts, ids[0], ids)
			}
			for _, ev := range g.Events {
				if ev.Kind != dlq.NotifyGroupNew || ev.Subject == "" {
					t.Errorf("event %+v", ev)
				}
			}
		}
		if ds, err := e.store.Outbox.DueNotifications(ctx, 20); err != nil || len(ds) != 0 {
			t.Errorf("due one by one: %+v, %v; want none: new groups go in digests", ds, err)
		}
		if r := e.seal(t); r != (dlq.DigestSealing{}) {
			t.Errorf("sealing again: %+v; want nothing", r)
		}
		again := e.due(t)
		for _, ep := range []string{"a", "b"} {
			if g := again[ep]; g.ID != due[ep].ID || !sameEventIDs(eventIDs(g), ids) {
				t.Errorf("endpoint %s read again: %d of %v; want the same digest", ep, g.ID, eventIDs(g))
			}
		}
	})

	// The first new group of a burst waits the gathering time for the
	// others (an outage's groups in its several tasks appear seconds
	// apart), then all go out in one digest.
	t.Run("ABurstIsGatheredBeforeItsFirstDigest", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		timing := dlq.DigestTiming{Window: time.Minute, Gather: 30 * time.Second}
		first := e.newGroups(t, 1)
		r, err := e.store.Outbox.SealNewGroupDigests(ctx, timing)
		if err != nil || r != (dlq.DigestSealing{}) {
			t.Fatalf("sealing a new group at once: %+v, %v; want it left to gather", r, err)
		}
		e.db.MustExec(`UPDATE notification_events SET created_at = created_at - interval '20 seconds'`)
		later := e.newGroups(t, 1)
		if r, _ := e.store.Outbox.SealNewGroupDigests(ctx, timing); r != (dlq.DigestSealing{}) {
			t.Fatalf("sealing 20 s into the gathering: %+v; want nothing yet", r)
		}
		e.db.MustExec(`UPDATE notification_events SET created_at = created_at - interval '11 seconds'`)
		if r, _ := e.store.Outbox.SealNewGroupDigests(ctx, timing); r != (dlq.DigestSealing{Digests: 2, Sealed: 4}) {
			t.Fatalf("sealing once the first gathered 31 s: %+v; want one digest per endpoint of both groups", r)
		}
		for ep, g := range e.due(t) {
			if want := slices.Concat(first, later); !sameEventIDs(eventIDs(g), want) {
				t.Errorf("endpoint %s: digest of %v; want %v", ep, eventIDs(g), want)
			}
		}
	})

	// A new group that joins an incident announced already (the outage
	// reached a second task a minute later) is no news: skipped, while
	// an unrelated new group is announced as usual.
	t.Run("ANewGroupOfAnIncidentAnnouncedAlreadyIsNotAnnouncedAgain", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		letter := func(task, class, msg string) string {
			fp, err := e.store.Groups.GroupLetter(ctx, grouping.Letter{Task: task, Class: class, Message: msg})
			if err != nil {
				t.Fatal(err)
			}
			storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: task, ErrorClass: class, Message: msg, Fingerprint: fp})
			return fp
		}
		outage := func(path, req string) string {
			return "payments-provider returned 503 Service Unavailable for POST " + path + " (request_id " + req + ")"
		}
		charge := letter("payments.charge", "ServiceUnavailable", outage("/v1/payment_intents", "req_4d67ab60"))
		e.fanOut(t)
		e.seal(t)
		for _, g := range e.due(t) {
			e.record(t, g, dlq.DeliveryAttempt{Delivered: true, Status: 200})
		}
		refund := letter("payments.refund", "ServiceUnavailable", outage("/v1/refunds", "req_cd3a0930"))
		other := letter("mail.send", "SMTPError", "mailbox full")
		e.fanOut(t)
		incidents, err := e.store.Groups.Incidents(ctx)
		if err != nil || len(incidents) != 1 || !incidents[0].Has(charge) || !incidents[0].Has(refund) {
			t.Fatalf("incidents %+v, %v; want one of %s and %s", incidents, err, charge, refund)
		}
		if n, err := e.store.Outbox.SkipIncidentRepeats(ctx, incidents); err != nil || n != 2 {
			t.Fatalf("skipped %d, %v; want the refund group on both endpoints", n, err)
		}
		e.passWindow(t)
		e.seal(t)
		for ep, g := range e.due(t) {
			if len(g.Events) != 1 || g.Events[0].Subject != other {
				t.Errorf("endpoint %s: digest of %+v; want only the unrelated group %s", ep, g.Events, other)
			}
		}
		var skipped int
		if err := e.db.Get(&skipped, `SELECT count(*) FROM notification_deliveries d JOIN notification_events ev ON ev.id = d.event_id
			WHERE ev.subject = $1 AND d.state = 'skipped' AND d.last_error LIKE '%one incident%'`, refund); err != nil || skipped != 2 {
			t.Errorf("%d skipped deliveries of the refund group saying why, %v; want 2", skipped, err)
		}
	})

	// A group merged into another before its digest is sealed (the
	// grouper learned that both are one failure) is no news: its
	// deliveries are skipped, and the digest lists the others.
	t.Run("AGroupMergedAwayIsNotAnnounced", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		ids := e.newGroups(t, 3)
		var subjects []string
		if err := e.db.Select(&subjects, `SELECT subject FROM notification_events WHERE id = ANY ($1) ORDER BY id`, pq.Array(ids)); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Groups.MergeGroupsUnchecked(ctx, subjects[1:2], subjects[0], dlq.Actor{Name: dlq.SystemActor}, "one failure"); err != nil {
			t.Fatal(err)
		}
		if r := e.seal(t); r != (dlq.DigestSealing{Digests: 2, Sealed: 4, Skipped: 2}) {
			t.Errorf("sealing: %+v; want 2 digests of the 2 groups left, the merged one skipped on both endpoints", r)
		}
		want := []int64{ids[0], ids[2]}
		for ep, g := range e.due(t) {
			if !sameEventIDs(eventIDs(g), want) {
				t.Errorf("endpoint %s: digest of %v; want %v", ep, eventIDs(g), want)
			}
		}
		for k, d := range e.deliveries(t) {
			if d.EventID == ids[1] && d.State != dlq.DeliverySkipped {
				t.Errorf("%s: %+v; want skipped", k, d)
			}
		}
	})

	// Groups found while an endpoint is inside its window wait for its
	// end, and are then sealed together into the next digest; the groups
	// already announced are never in another.
	t.Run("WithinTheWindowWaitsForTheNextDigest", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		first := e.newGroups(t, 3)
		e.seal(t)
		for _, g := range e.due(t) {
			e.record(t, g, dlq.DeliveryAttempt{Delivered: true, Status: 200})
		}
		later := e.newGroups(t, 2)
		if r := e.seal(t); r != (dlq.DigestSealing{Postponed: 4}) {
			t.Errorf("sealing within the window: %+v; want the 2 groups postponed on both endpoints", r)
		}
		for k, d := range e.deliveries(t) {
			if d.EventID >= later[0] && (d.DigestID != nil || d.WaitS < 55 || d.WaitS > 61) {
				t.Errorf("%s: %+v; want it unsealed, waiting about a minute", k, d)
			}
		}
		if due := e.due(t); len(due) != 0 {
			t.Errorf("due within the window: %+v", due)
		}
		more := e.newGroups(t, 1)
		e.passWindow(t)
		if r := e.seal(t); r != (dlq.DigestSealing{Digests: 2, Sealed: 6}) {
			t.Errorf("sealing after the window: %+v; want 2 digests of the 3 groups that waited", r)
		}
		want := slices.Concat(later, more)
		for ep, g := range e.due(t) {
			if g.ID != later[0] || !sameEventIDs(eventIDs(g), want) {
				t.Errorf("endpoint %s: digest %d of %v; want %d of %v", ep, g.ID, eventIDs(g), later[0], want)
			}
			e.record(t, g, dlq.DeliveryAttempt{Delivered: true, Status: 200})
		}
		e.passWindow(t)
		if r := e.seal(t); r != (dlq.DigestSealing{}) {
			t.Errorf("sealing with every group announced: %+v; want nothing", r)
		}
		for k, d := range e.deliveries(t) {
			wantDigest := first[0]
			if d.EventID >= later[0] {
				wantDigest = later[0]
			}
			if d.State != dlq.DeliveryDelivered || d.DigestID == nil || *d.DigestID != wantDigest || d.Attempts != 1 {
				t.Errorf("%s: %+v; want delivered once, in digest %d", k, d, wantDigest)
			}
		}
	})

	// A digest that fails keeps its groups, and only them: a group found
	// meanwhile waits for the next digest, even once the window is past,
	// until this one settles. Given up, the digest fails whole.
	t.Run("AFailedDigestIsRetriedWhole", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		e.eps = e.eps[:1]
		ids := e.newGroups(t, 3)
		e.seal(t)
		g := e.due(t)["a"]
		e.record(t, g, dlq.DeliveryAttempt{Status: 503, Error: "answered 503", RetryAt: time.Now().Add(time.Hour)})
		if due := e.due(t); len(due) != 0 {
			t.Errorf("due before the retry: %+v", due)
		}
		late := e.newGroups(t, 1)
		e.passWindow(t)
		// The retry is now due (an hour less a minute): the late group
		// waits for it, postponed to it.
		e.db.MustExec(`UPDATE notification_deliveries SET next_attempt_at = now() + interval '10 minutes' WHERE digest_id IS NOT NULL`)
		if r := e.seal(t); r != (dlq.DigestSealing{Postponed: 1}) {
			t.Errorf("sealing while a digest is being tried: %+v; want the late group postponed", r)
		}
		if d := e.deliveries(t)[fmt.Sprintf("a/%d", late[0])]; d.DigestID != nil || d.WaitS < 590 || d.WaitS > 601 {
			t.Errorf("late group %+v; want it waiting for the retry, 10 minutes", d)
		}
		e.db.MustExec(`UPDATE notification_deliveries SET next_attempt_at = now() WHERE digest_id IS NOT NULL`)
		again := e.due(t)["a"]
		if again.ID != g.ID || !sameEventIDs(eventIDs(again), ids) || again.Attempts != 1 {
			t.Errorf("retry: digest %d of %v (%d attempts); want %d of %v, 1 attempt made", again.ID, eventIDs(again), again.Attempts, g.ID, ids)
		}
		e.record(t, again, dlq.DeliveryAttempt{Status: 400, Error: "answered 400"}) // given up
		for _, id := range ids {
			if d := e.deliveries(t)[fmt.Sprintf("a/%d", id)]; d.State != dlq.DeliveryFailed || d.Attempts != 2 {
				t.Errorf("group %d: %+v; want failed after 2 attempts", id, d)
			}
		}
		e.db.MustExec(`UPDATE notification_deliveries SET next_attempt_at = now() WHERE state = 'pending'`)
		if r := e.seal(t); r != (dlq.DigestSealing{Digests: 1, Sealed: 1}) {
			t.Errorf("sealing after the digest was given up: %+v; want the late group's", r)
		}
		if next := e.due(t)["a"]; next.ID != late[0] || !sameEventIDs(eventIDs(next), late) {
			t.Errorf("next digest %d of %v; want the late group alone", next.ID, eventIDs(next))
		}
	})

	// Two senders (one whose lease ran out while it worked) sealing at
	// once make one digest per endpoint, each group in one.
	t.Run("ConcurrentSealersSealEachGroupOnce", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		e.eps = append(e.eps, dlq.NotificationEndpoint{Hash: "c", Redacted: "json https://c.example/…"})
		e.newGroups(t, 20)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			total dlq.DigestSealing
		)
		for range 8 {
			wg.Go(func() {
				r, err := e.store.Outbox.SealNewGroupDigests(ctx, dlq.DigestTiming{Window: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				total.Digests += r.Digests
				total.Sealed += r.Sealed
			})
		}
		wg.Wait()
		if total != (dlq.DigestSealing{Digests: 3, Sealed: 60}) {
			t.Errorf("sealed in all %+v; want 3 digests of 20", total)
		}
		var n int
		if err := e.db.Get(&n, `SELECT count(DISTINCT (endpoint_hash, digest_id)) FROM notification_deliveries WHERE digest_id IS NOT NULL`); err != nil || n != 3 {
			t.Errorf("%d digests, %v; want 3", n, err)
		}
	})

	// Spikes, operations and pauses are not digested: each is due on its
	// own at once, whatever the new groups' windows.
	t.Run("OtherNotificationsAreSentOneByOne", func(t *testing.T) {
		t.Parallel()
		e := newDigestEnv(t)
		e.newGroups(t, 2)
		e.seal(t) // both windows open
		storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "search.index", ErrorClass: "Timeout", FailedAt: time.Now().Add(-3 * time.Hour)})
		for range 4 {
			storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "search.index", ErrorClass: "Timeout"})
		}
		if n, err := e.store.Outbox.DetectSpikes(ctx, dlq.Spike{Threshold: 4, Window: time.Minute, Quiet: time.Hour}); err != nil || n != 1 {
			t.Fatalf("spikes: %d, %v", n, err)
		}
		var op int64
		if err := e.db.Get(&op, `INSERT INTO operations (kind, actor, ids, max_id, matched)
			VALUES ('replay', 'alice', '{1}', 1, 1) RETURNING id`); err != nil {
			t.Fatal(err)
		}
		e.db.MustExec(`UPDATE operations SET state = 'done', done_count = 1, finished_at = now() WHERE id = $1`, op)
		e.fanOut(t)
		if r := e.seal(t); r != (dlq.DigestSealing{}) {
			t.Errorf("sealing: %+v; spikes and operations are not digested", r)
		}
		ds, err := e.store.Outbox.DueNotifications(ctx, 20)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, d := range ds {
			kinds[d.Kind]++
			if d.DigestID != nil {
				t.Errorf("delivery %+v in a digest", d)
			}
		}
		if kinds[dlq.NotifyGroupSpike] != 2 || kinds[dlq.NotifyOperationDone] != 2 || len(ds) != 4 {
			t.Errorf("due one by one: %v; want the spike and the operation's end, to both endpoints", kinds)
		}
	})
}
