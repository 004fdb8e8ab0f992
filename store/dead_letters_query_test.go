package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
)

// letterStore is a store on a fresh database with no letters yet.
func letterStore(t *testing.T) (*storetest.Stores, *storetest.DB) {
	t.Helper()
	db := storetest.NewDB(t)
	return storetest.NewStores(db.DB), db
}

func mustLetterFilter(t *testing.T, query string, now time.Time) dlq.Filter {
	t.Helper()
	v, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	f, err := handlers.ParseFilter(v, now)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return f
}

func letterIDs(letters []dlq.DeadLetter) []int64 {
	out := make([]int64, len(letters))
	for i, d := range letters {
		out[i] = d.ID
	}
	return out
}

func TestListDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	now := time.Now().UTC().Truncate(time.Second)
	ins := func(l storetest.Letter) int64 { return storetest.InsertDeadLetter(t, db.DB, l) }
	const fpCard, fpSMTP, fpLease, fpKey = "00000000000000ca", "0000000000000517", "00000000000000ea", "00000000000000ee"

	charge := ins(storetest.Letter{Task: "billing.charge", Queue: "payments", ErrorClass: "CardError", Message: "card declined for order 17",
		Reason: "permanent", FailedAt: now.Add(-3 * time.Hour), Fingerprint: fpCard})
	email := ins(storetest.Letter{Task: "email.send", Queue: "email", ErrorClass: "TimeoutError", Message: "smtp timed out",
		Args: `["ann@example.com"]`, FailedAt: now.Add(-2 * time.Hour), Fingerprint: fpSMTP})
	lease := ins(storetest.Letter{Task: "reports.generate", ErrorClass: "LeaseExpired", Message: "worker vanished",
		Reason: "lease_expired", FailedAt: now.Add(-1 * time.Hour), Fingerprint: fpLease})
	replayed := ins(storetest.Letter{Task: "billing.charge", Queue: "payments", ErrorClass: "CardError", Message: "card declined for order 99",
		Reason: "permanent", FailedAt: now.Add(-30 * time.Minute), Status: "replayed", Fingerprint: fpCard})
	discarded := ins(storetest.Letter{Task: "email.send", Queue: "email", ErrorClass: "TimeoutError", Message: "100% of retries used",
		FailedAt: now.Add(-10 * time.Minute), Status: "discarded", Fingerprint: fpSMTP})
	underscore := ins(storetest.Letter{Task: "email.send", Queue: "email", ErrorClass: "KeyError", Message: "missing key a_b",
		FailedAt: now.Add(-5 * time.Minute), Fingerprint: fpKey})
	likeBait := ins(storetest.Letter{Task: "email.send", Queue: "email", ErrorClass: "KeyError", Message: "missing key axb and 1000 of retries",
		FailedAt: now.Add(-4 * time.Minute), Fingerprint: fpKey})

	cases := []struct {
		query string
		want  []int64
	}{
		{"", []int64{likeBait, underscore, lease, email, charge}},
		{"status=all", []int64{likeBait, underscore, discarded, replayed, lease, email, charge}},
		{"status=replayed", []int64{replayed}},
		{"status=discarded", []int64{discarded}},
		{"task=billing.charge&status=all", []int64{replayed, charge}},
		{"queue=email", []int64{likeBait, underscore, email}},
		{"reason=lease_expired", []int64{lease}},
		{"reason=permanent&status=all", []int64{replayed, charge}},
		{"error_class=KeyError", []int64{likeBait, underscore}},
		{"fingerprint=" + fpCard + "&status=all", []int64{replayed, charge}},
		{"fingerprint=" + fpKey + "," + fpCard, []int64{likeBait, underscore, charge}},
		{"fingerprint=" + fpKey + "," + fpCard + "&status=all", []int64{likeBait, underscore, replayed, charge}},
		{"fingerprint=" + fpSMTP + "," + fpCard + "&status=all&q=declined", []int64{replayed, charge}},
		{"fingerprint=" + fpSMTP + "," + fpLease + "&status=discarded", []int64{discarded}},
		{"fingerprint=" + fpSMTP + ",00000000000000ff&reason=exhausted", []int64{email}},
		{"q=DECLINED&status=all", []int64{replayed, charge}},
		{"q=ann@example", []int64{email}},
		{"q=100%25&status=all", []int64{discarded}},
		{"q=a_b", []int64{underscore}},
		{"since=90m&status=all", []int64{likeBait, underscore, discarded, replayed, lease}},
		{"until=90m&status=all", []int64{email, charge}},
		{"since=150m&until=45m", []int64{lease, email}},
		{"task=email.send&q=timed+out", []int64{email}},
		{"task=nothing.here", nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			f := mustLetterFilter(t, tc.query, now)
			page, err := store.Letters.ListDeadLetters(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if got := letterIDs(page.Letters); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if page.Next != nil {
				t.Fatal("one page only: no next cursor expected")
			}
			// What is counted, not how fast: the default budget (30 ms)
			// can run out on a loaded machine (TestCountGivesUpPastItsBudget
			// tests the budget).
			count, err := store.Letters.CountDeadLettersWithin(ctx, f, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if !count.Exact || count.N != int64(len(tc.want)) {
				t.Fatalf("count %+v, want exactly %d", count, len(tc.want))
			}
		})
	}
}

// Paging visits every letter exactly once, newest first, even when many
// letters share one failed_at (the id breaks the tie).
func TestListDeadLettersKeysetVisitsEachOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 137 {
		// Seven distinct times: runs of about 20 letters tie on failed_at.
		at := base.Add(-time.Duration(i%7) * time.Minute)
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{FailedAt: at, Task: "t." + fmt.Sprint(i%3)})
	}
	for _, query := range []string{"limit=10", "limit=1&task=t.1", "limit=500"} {
		f := mustLetterFilter(t, query, base)
		var seen []int64
		var last *dlq.DeadLetter
		pages := 0
		for {
			page, err := store.Letters.ListDeadLetters(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for i := range page.Letters {
				d := page.Letters[i]
				if last != nil && (d.FailedAt.After(last.FailedAt) || (d.FailedAt.Equal(last.FailedAt) && d.ID >= last.ID)) {
					t.Fatalf("%s: letter %d out of order after %d", query, d.ID, last.ID)
				}
				last = &d
				seen = append(seen, d.ID)
			}
			if page.Next == nil {
				break
			}
			// Through the query string, as the browser does it.
			f = mustLetterFilter(t, f.FirstPage().Values().Encode()+"&cursor="+page.Next.String(), base)
		}
		want := 137
		if strings.Contains(query, "task=t.1") {
			want = 46
		}
		slices.Sort(seen)
		if len(seen) != want || len(slices.Compact(slices.Clone(seen))) != want {
			t.Fatalf("%s: saw %d letters (%d distinct) in %d pages, want %d once each", query, len(seen), len(slices.Compact(slices.Clone(seen))), pages, want)
		}
		if query == "limit=10" && pages != 14 {
			t.Fatalf("137 letters by 10 should be 14 pages, got %d", pages)
		}
	}
}

func TestCountDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	now := time.Now().UTC()
	if err := storetest.SeedDeadLetters(ctx, db.DB, dlq.LetterCountCap+500, now); err != nil {
		t.Fatal(err)
	}
	var pending, all int64
	if err := db.Get(&pending, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&all, `SELECT count(*) FROM dead_letters`); err != nil {
		t.Fatal(err)
	}
	var fp string
	var fpTotal, fpPending int64
	if err := db.QueryRow(`SELECT fingerprint, count(*), count(*) FILTER (WHERE status = 'pending') FROM dead_letters GROUP BY 1 ORDER BY 2 DESC LIMIT 1`).Scan(&fp, &fpTotal, &fpPending); err != nil {
		t.Fatal(err)
	}
	var fp2 string
	var fp2Total, fp2Pending int64
	if err := db.QueryRow(`SELECT fingerprint, count(*), count(*) FILTER (WHERE status = 'pending') FROM dead_letters GROUP BY 1 ORDER BY 2 DESC OFFSET 1 LIMIT 1`).Scan(&fp2, &fp2Total, &fp2Pending); err != nil {
		t.Fatal(err)
	}
	var capped int64
	if err := db.Get(&capped, `SELECT count(*) FROM dead_letters WHERE status = 'pending' AND reason = 'exhausted'`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		query string
		want  dlq.Count
	}{
		{"PendingFromSummaries", "", dlq.Count{N: pending, Exact: true}},
		{"AllFromSummaries", "status=all", dlq.Count{N: all, Exact: true}},
		{"FingerprintFromGroups", "status=all&fingerprint=" + fp, dlq.Count{N: fpTotal, Exact: true}},
		{"FingerprintPendingFromGroups", "fingerprint=" + fp, dlq.Count{N: fpPending, Exact: true}},
		{"UnknownFingerprint", "fingerprint=00000000000000ff", dlq.Count{N: 0, Exact: true}},
		{"TwoFingerprintsFromGroups", "status=all&fingerprint=" + fp + "," + fp2, dlq.Count{N: fpTotal + fp2Total, Exact: true}},
		{"TwoFingerprintsPendingFromGroups", "fingerprint=" + fp + ",00000000000000ff," + fp2, dlq.Count{N: fpPending + fp2Pending, Exact: true}},
		{"CappedWhenLarge", "status=all&q=order", dlq.Count{N: dlq.LetterCountCap, Exact: false}},
		{"ExactBelowCap", "q=ord_77", dlq.Count{}},
	}
	var exactSearch int64
	if err := db.Get(&exactSearch, `SELECT count(*) FROM dead_letters d JOIN dead_letter_search s ON s.dead_letter_id = d.id
		WHERE d.status = 'pending' AND s.search_text ILIKE '%ord\_77%'`); err != nil {
		t.Fatal(err)
	}
	cases[len(cases)-1].want = dlq.Count{N: exactSearch, Exact: true}
	if capped > dlq.LetterCountCap {
		cases = append(cases, struct {
			name  string
			query string
			want  dlq.Count
		}{"CappedByReason", "reason=exhausted", dlq.Count{N: dlq.LetterCountCap}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A generous budget: this test is about the numbers, and a
			// busy CI machine must not turn them into "too slow".
			got, err := store.Letters.CountDeadLettersWithin(ctx, mustLetterFilter(t, tc.query, now), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCountGivesUpPastItsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	if err := storetest.SeedDeadLetters(ctx, db.DB, 12_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Finding 10,001 search matches cannot finish in a millisecond.
	got, err := store.Letters.CountDeadLettersWithin(ctx, mustLetterFilter(t, "status=all&q=order", time.Now()), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !got.TooSlow {
		t.Fatalf("want TooSlow, got %+v", got)
	}
	// The connection is usable afterwards: the timeout was local to the count.
	if _, err := store.Letters.CountDeadLetters(ctx, mustLetterFilter(t, "", time.Now())); err != nil {
		t.Fatal(err)
	}
}

func TestGetDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)

	t.Run("UnknownIsNotFound", func(t *testing.T) {
		_, err := store.Letters.GetDeadLetter(ctx, 424242)
		if !errors.Is(err, dlq.ErrNotFound) {
			t.Fatalf("want ErrNotFound, got %v", err)
		}
	})

	t.Run("HugeTracebacksAreCapped", func(t *testing.T) {
		huge := strings.Repeat("frame line\n", 30_000) // 330,000 characters
		history := fmt.Sprintf(`[{"attempt":1,"at":"2026-03-01T00:00:00Z","class":"E","message":"m","outcome":"retry","traceback":%q},
			{"attempt":2,"at":"2026-03-01T00:01:00Z","class":"E","message":"m","outcome":"dead","traceback":"short"}]`, huge)
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Traceback: huge, History: history, Attempts: 2})
		d, err := store.Letters.GetDeadLetter(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Traceback) != dlq.TracebackCap+len(mask.TruncatedMark) || d.TracebackLen != len(huge) || !d.TracebackTruncated() {
			t.Fatalf("traceback %d chars of %d, truncated=%v", len(d.Traceback), d.TracebackLen, d.TracebackTruncated())
		}
		if len(d.History) != 2 || len(d.History[0].Traceback) != dlq.AttemptTracebackCap+len(mask.TruncatedMark) || d.History[1].Traceback != "short" {
			t.Fatalf("history not capped per attempt: %d entries", len(d.History))
		}
	})

	t.Run("Lineage", func(t *testing.T) {
		first := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Status: "replayed", ReplayJobID: 77})
		second := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{ReplayOf: &first})
		d, err := store.Letters.GetDeadLetter(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(d.LaterLetters, []int64{second}) || d.ReplayJobID == nil || *d.ReplayJobID != 77 || d.Status != dlq.StatusReplayed {
			t.Fatalf("lineage of the first: later %v, replay job %v, status %s", d.LaterLetters, d.ReplayJobID, d.Status)
		}
		d2, err := store.Letters.GetDeadLetter(ctx, second)
		if err != nil {
			t.Fatal(err)
		}
		if d2.ReplayOf == nil || *d2.ReplayOf != first || len(d2.LaterLetters) != 0 {
			t.Fatalf("lineage of the second: %+v", d2.ReplayOf)
		}
	})
}

func TestEachDeadLetterStreamsTheWholeSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	now := time.Now().UTC()
	if err := storetest.SeedDeadLetters(ctx, db.DB, 2600, now); err != nil {
		t.Fatal(err)
	}
	f := mustLetterFilter(t, "status=all&limit=5", now)
	f.After = &dlq.Cursor{FailedAt: now, ID: 1} // export ignores the page position
	var seen []int64
	err := store.Letters.EachDeadLetter(ctx, f, func(d dlq.DeadLetter) error {
		seen = append(seen, d.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seen)
	if len(seen) != 2600 || len(slices.Compact(seen)) != 2600 {
		t.Fatalf("export saw %d letters, want 2600 once each", len(seen))
	}

	stop := errors.New("client went away")
	n := 0
	err = store.Letters.EachDeadLetter(ctx, f, func(dlq.DeadLetter) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 10 {
		t.Fatalf("a callback error must stop the export: %v after %d", err, n)
	}
}

func TestGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: "big", Task: "a.big", FailedAt: now.Add(-time.Duration(i)*24*time.Hour - time.Hour)})
	}
	for range 3 {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: "old", Task: "b.old", FailedAt: now.Add(-20 * 24 * time.Hour), Status: "replayed"})
	}
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: "new", Task: "b.new", FailedAt: now.Add(-time.Minute)})

	order := func(sort, task string) []string {
		groups, err := store.Groups.ListGroups(ctx, dlq.GroupFilter{Sort: sort, Task: task, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var fps []string
		for _, g := range groups {
			fps = append(fps, g.Fingerprint)
		}
		return fps
	}
	for _, tc := range []struct {
		sort, task string
		want       []string
	}{
		{"pending", "", []string{"big", "new", "old"}},
		{"total", "", []string{"big", "old", "new"}},
		{"last_seen", "", []string{"new", "big", "old"}},
		{"pending", "b.old", []string{"old"}},
	} {
		if got := order(tc.sort, tc.task); !slices.Equal(got, tc.want) {
			t.Errorf("sort %s task %q: got %v, want %v", tc.sort, tc.task, got, tc.want)
		}
	}

	inflow, err := store.Groups.GroupInflow(ctx, []string{"big", "old", "new", "none"}, now)
	if err != nil {
		t.Fatal(err)
	}
	// big: one letter on each of the last five days, newest last.
	if want := []int64{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}; !slices.Equal(inflow["big"], want) {
		t.Errorf("big inflow %v, want %v", inflow["big"], want)
	}
	if !slices.Equal(inflow["old"], make([]int64, dlq.SparkDays)) || !slices.Equal(inflow["none"], make([]int64, dlq.SparkDays)) {
		t.Errorf("letters older than 14 days must not show: old %v none %v", inflow["old"], inflow["none"])
	}
	if inflow["new"][dlq.SparkDays-1] != 1 {
		t.Errorf("new inflow %v", inflow["new"])
	}
}

// The daily inflow behind the sparklines always equals the hourly inflow
// summed by UTC day, through inserts, status changes and purges.
func TestInflowDailyFollowsHourly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := letterStore(t)
	if err := storetest.SeedDeadLetters(ctx, db.DB, 3000, time.Now()); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		var mismatches int
		err := db.Get(&mismatches, `SELECT count(*) FROM (
			(SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date AS day, sum(n) AS n FROM dead_letter_inflow GROUP BY 1, 2
			 EXCEPT SELECT fingerprint, day, n FROM dead_letter_inflow_daily)
			UNION ALL
			(SELECT fingerprint, day, n FROM dead_letter_inflow_daily
			 EXCEPT SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date, sum(n) FROM dead_letter_inflow GROUP BY 1, 2)) x`)
		if err != nil {
			t.Fatal(err)
		}
		if mismatches != 0 {
			t.Fatalf("%s: %d daily rows disagree with the hourly inflow", stage, mismatches)
		}
	}
	check("after insert")
	storetest.Settle(t, db, storetest.Outcome{Status: "discarded", By: "t", Reason: "r"}, "id % 5 = 0")
	check("after discard")
	if _, err := db.Exec(`DELETE FROM dead_letter_records WHERE id % 3 = 0`); err != nil {
		t.Fatal(err)
	}
	check("after purge")
	if err := storetest.SeedDeadLetters(ctx, db.DB, 500, time.Now()); err != nil {
		t.Fatal(err)
	}
	check("after more letters")
}

// TestListRowsMatchTheDetail: the list scans its columns by hand, in
// order; every field it reads must be the letter's, as the detail (sqlx,
// by column name) reads it, nullable ones of replayed and discarded
// letters included.
func TestListRowsMatchTheDetail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	now := time.Now()
	if err := storetest.SeedDeadLetters(ctx, db.DB, 400, now); err != nil {
		t.Fatal(err)
	}
	page, err := store.Letters.ListDeadLetters(ctx, mustLetterFilter(t, "status=all&limit=500", now))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Letters) != 400 {
		t.Fatalf("listed %d letters, want 400", len(page.Letters))
	}
	statuses := map[dlq.Status]bool{}
	for _, got := range page.Letters {
		d, err := store.Letters.GetDeadLetter(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := d.DeadLetter
		want.Traceback, want.History = "", nil // not in the list
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("letter %d listed as\n%+v\nbut is\n%+v", got.ID, got, want)
		}
		statuses[got.Status] = true
	}
	if len(statuses) < 3 {
		t.Errorf("the seed gave only statuses %v: the nullable columns are not all checked", statuses)
	}
}

// An attempt's traceback cut at AttemptTracebackCap in the middle of a
// secret must not show the secret's first digits on the detail: the cut
// is marked, so masking knows to hide the partial secret before it.
func TestGetDeadLetterCutSecretMasked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := letterStore(t)
	card := "4000056655665556"
	long := strings.Repeat("x", dlq.AttemptTracebackCap-6) + card + "\n"
	history := fmt.Sprintf(`[{"attempt":1,"at":"2026-03-01T00:00:00Z","class":"E","message":"m","outcome":"dead","traceback":%q}]`, long)
	final := strings.Repeat("y", dlq.TracebackCap-6) + card
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Kwargs: `{"card_number": "` + card + `"}`, Traceback: final, History: history})
	d, err := store.Letters.GetDeadLetter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	dlq.MaskLetter(mask.ForKeys(mask.DefaultKeys), &d.DeadLetter)
	if tb := d.History[0].Traceback; strings.Contains(tb, "x400005") || !strings.HasSuffix(tb, mask.TruncatedMark) {
		t.Errorf("attempt traceback ends %q: shows the start of the card, or hides that it was cut", tb[len(tb)-40:])
	}
	if tb := d.Traceback; strings.Contains(tb, "y400005") || !d.TracebackTruncated() {
		t.Errorf("traceback ends %q: shows the start of the card", tb[len(tb)-40:])
	}
}
