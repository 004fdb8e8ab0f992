package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Above 1,000 letters the confirmation starts with a canary of 10, a pace
// of 50 per second and the died-again guard; smaller selections start with
// none of them (whole error groups have their own threshold: see
// TestGroupReplayIsSafeByDefault). The sample is the newest letters by
// time of failure, not by id.
func TestBulkConfirmationSafeDefaults(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	// 1,001 letters failed a day ago, ids 1..1001; then one letter with a
	// higher id that failed two days ago, and one that is the newest failure.
	insert := func(n int, fp, ago, msg string) {
		t.Helper()
		if _, err := a.db.Exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
			attempts, max_attempts, reason, fingerprint, enqueued_at, failed_at)
			SELECT nextval(pg_get_serial_sequence('jobs', 'id')), 'default', 'billing.charge', '[]', '{}', 'ChargeError',
				$4, 3, 3, 'exhausted', $2, now() - $3::interval, now() - $3::interval
			FROM generate_series(1, $1)`, n, fp, ago, msg); err != nil {
			t.Fatal(err)
		}
	}
	insert(1000, "00000000000000b1", "1 day", "old")
	insert(1, "00000000000000b1", "1 minute", "newest failure")
	insert(1, "00000000000000b1", "2 days", "highest id, oldest failure")
	insert(3, "00000000000000b2", "1 day", "small")

	confirm := func(t *testing.T, filter url.Values) (canary bool, size, rate, guard, firstSample string) {
		t.Helper()
		q := url.Values{"action": {"replay"}, "all_matching": {"1"}, "filter": {filter.Encode()}}
		rec, doc := a.page(t, a.olga, "/dead-letters/bulk?"+q.Encode())
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %.300s", rec.Code, rec.Body.String())
		}
		_, canary = doc.Find(`[data-testid="confirm-canary"]`).Attr("checked")
		size, _ = doc.Find(`[data-testid="confirm-canary-size"]`).Attr("value")
		rate, _ = doc.Find(`[data-testid="confirm-rate"]`).Attr("value")
		guard, _ = doc.Find(`[data-testid="confirm-died-again"]`).Attr("value")
		return canary, size, rate, guard, squash(doc.Find(`[data-testid="sample-row"]`).First())
	}

	t.Run("Large", func(t *testing.T) {
		// By task, not by group: a group gets the defaults from 21 letters
		// on (bulk_groups_test.go).
		canary, size, rate, guard, first := confirm(t, url.Values{"task": {"billing.charge"}})
		if !canary || size != "10" || rate != "50" || guard != "20" {
			t.Fatalf("1,005 letters: canary %v of %q at %q/s, guard %q%%; want a canary of 10 at 50/s, guard 20%%", canary, size, rate, guard)
		}
		if !strings.Contains(first, "newest failure") {
			t.Fatalf("first sample row %q, want the newest failure", first)
		}
	})
	t.Run("Small", func(t *testing.T) {
		canary, _, rate, guard, _ := confirm(t, url.Values{"fingerprint": {"00000000000000b2"}})
		if canary || rate != "" || guard != "" {
			t.Fatalf("3 letters: canary %v, pace %q, guard %q; want none", canary, rate, guard)
		}
	})
}
