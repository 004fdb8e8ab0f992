package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/storetest"
)

// outageMessage is a letter of the payments outage the tests of a group's
// variables fill: a host, an order and the customer's e-mail vary.
func outageMessage(host, order, email string) string {
	return fmt.Sprintf("connect to %s:443 failed for order %s of %s", host, order, email)
}

// learnGroup has store learn the group of a payments.charge letter with
// message, as a worker would, and returns its id.
func learnGroup(t *testing.T, store *storetest.Stores, message string) string {
	t.Helper()
	id, err := store.Groups.GroupLetter(context.Background(), grouping.Letter{Task: "billing.charge", Class: "ConnectionError", Message: message})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// insertGroupLetters inserts n letters of group fp in one statement:
// letter g (1..n) has the message msgSQL and failed at failedSQL, SQL
// expressions of g.
func insertGroupLetters(t *testing.T, db *storetest.DB, fp string, n int, msgSQL, failedSQL string) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
		traceback, attempts, max_attempts, history, reason, fingerprint, enqueued_at, failed_at)
		SELECT 1000000 + g + (SELECT coalesce(max(job_id), 0) FROM dead_letter_records), 'payments', 'billing.charge',
			'[]', jsonb_build_object('email', 'jane@example.com'), 'ConnectionError', `+msgSQL+`, '', 5, 5, '[]', 'exhausted', $1,
			`+failedSQL+` - interval '1 minute', `+failedSQL+`
		FROM generate_series(1, $2) g`, fp, n)
	if err != nil {
		t.Fatalf("insert %d letters: %v", n, err)
	}
}

func TestGroupVariables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	policy := mask.ForKeys([]string{"email"})

	t.Run("CountsEachVariablesValuesAndMasksWhatTheLetterPageMasks", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		fp := learnGroup(t, store, outageMessage("payments-3.eu-west-1", "ord_3DZ6VXS7", "someone@example.com"))
		for i := range 47 {
			host := "payments-3.eu-west-1"
			if i%8 == 7 {
				host = "payments-1.eu-west-1"
			}
			email := fmt.Sprintf("customer%d@example.com", i%5)
			storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", ErrorClass: "ConnectionError",
				Fingerprint: fp, Kwargs: fmt.Sprintf(`{"email": %q}`, email),
				Message: outageMessage(host, fmt.Sprintf("ord_%08X", 0x3D000+i), email)})
		}
		// One letter filed under the group that its template does not fit.
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge", ErrorClass: "ConnectionError",
			Fingerprint: fp, Message: "payments-api is down"})

		got, err := store.Groups.GroupVariables(ctx, fp, policy)
		if err != nil {
			t.Fatal(err)
		}
		if text := strings.Join(got.Tokens, " "); text != "connect to <*> failed for order <*> of <*>" {
			t.Fatalf("template %q", text)
		}
		if parts := fmt.Sprint(got.Parts); parts != "[{connect to  -1} { 0} { failed for order  -1} { 1} { of  -1} { 2}]" {
			t.Errorf("parts %s", parts)
		}
		if got.Read != 48 || got.Fit != 47 {
			t.Errorf("read %d letters, %d fit; want 48, 47", got.Read, got.Fit)
		}
		if len(got.Variables) != 3 {
			t.Fatalf("%d variables, want 3: %+v", len(got.Variables), got.Variables)
		}
		host, order, email := got.Variables[0], got.Variables[1], got.Variables[2]
		if host.At != 2 || host.Distinct != 2 || host.Prefix != "payments-" ||
			fmt.Sprint(host.Top) != "[{payments-3.eu-west-1:443 42 false} {payments-1.eu-west-1:443 5 false}]" {
			t.Errorf("host: %+v", host)
		}
		if order.At != 6 || order.Distinct != 47 || order.Prefix != "ord_0003D0" || len(order.Top) != 5 || order.Top[0].N != 1 {
			t.Errorf("order: %+v", order)
		}
		// The e-mails are hidden, each letter's by its own arguments; they
		// still count as five.
		if email.At != 8 || email.Distinct != 5 || email.Prefix != "" ||
			fmt.Sprint(email.Top) != "[{"+mask.Placeholder+" 47 true}]" {
			t.Errorf("email: %+v", email)
		}
	})

	t.Run("ReadsTheNewestLettersOnly", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		fp := learnGroup(t, store, outageMessage("payments-3.eu-west-1", "ord_3DZ6VXS7", "someone@example.com"))
		// 100 old letters from another host, then a full sample of new ones.
		insertGroupLetters(t, db, fp, 100, `'connect to old-7.eu-west-1:443 failed for order ord_' || g || ' of x' || g || '@example.com'`,
			`now() - interval '2 days'`)
		insertGroupLetters(t, db, fp, dlq.GroupVariablesSample, `'connect to payments-' || (g % 4) || '.eu-west-1:443 failed for order ord_' || g || ' of x' || g || '@example.com'`,
			`now() - g * interval '1 second'`)
		got, err := store.Groups.GroupVariables(ctx, fp, policy)
		if err != nil {
			t.Fatal(err)
		}
		if got.Read != dlq.GroupVariablesSample || got.Fit != dlq.GroupVariablesSample {
			t.Errorf("read %d, %d fit; want %d", got.Read, got.Fit, dlq.GroupVariablesSample)
		}
		if host := got.Variables[0]; host.Distinct != 4 || host.Top[0].N != dlq.GroupVariablesSample/4 {
			t.Errorf("host: %+v, want the 4 new hosts only", host)
		}
	})

	t.Run("AGroupWithoutATemplateHasNoVariables", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		fp := storetest.GroupID("before templates")
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: fp, Message: "card declined for order 42"})
		got, err := store.Groups.GroupVariables(ctx, fp, policy)
		if err != nil {
			t.Fatal(err)
		}
		if got.Tokens != nil || got.Variables != nil || got.Read != 0 {
			t.Errorf("got %+v, want nothing", got)
		}
	})
}

func TestGroupMinutely(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	now := time.Date(2026, 12, 7, 3, 30, 20, 0, time.UTC)
	fp, other := storetest.GroupID("minutely"), storetest.GroupID("another")
	at := func(fp string, t0 time.Time) {
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: fp, FailedAt: t0})
	}
	at(fp, now.Add(-5*time.Second))                  // this minute, so far
	at(fp, now.Add(-4*time.Minute))                  // 03:26
	at(fp, now.Add(-4*time.Minute-10*time.Second))   // 03:26
	at(other, now.Add(-4*time.Minute))               // another group
	at(fp, now.Add(-179*time.Minute-20*time.Second)) // 00:31, the oldest minute
	at(fp, now.Add(-180*time.Minute-20*time.Second)) // 00:30: too old
	at(fp, now.Add(time.Minute))                     // in the future: left out
	got, err := store.Groups.GroupMinutely(ctx, fp, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != dlq.GroupMinutes {
		t.Fatalf("%d buckets, want %d", len(got), dlq.GroupMinutes)
	}
	if first, last := got[0].Start, got[len(got)-1].Start; !first.Equal(time.Date(2026, 12, 7, 0, 31, 0, 0, time.UTC)) ||
		!last.Equal(time.Date(2026, 12, 7, 3, 30, 0, 0, time.UTC)) {
		t.Errorf("buckets from %s to %s", first, last)
	}
	want := map[int]int64{0: 1, 175: 2, 179: 1}
	for i, b := range got {
		if b.N != want[i] {
			t.Errorf("bucket %d (%s): %d letters, want %d", i, b.Start.Format("15:04"), b.N, want[i])
		}
	}
}

// TestGroupPageReadsAreBounded: the newest letters' messages of a group
// are one walk of the fingerprint index that stops at the sample, and the
// inflow per minute reads that index's range of the window, not the table,
// even for a group that holds most letters but failed a week ago, behind
// 15,000 newer letters of another group.
func TestGroupPageReadsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	insertGroupLetters(t, db, storetest.GroupID("newer"), 15_000, `'payments-api is down'`, `now() - g * interval '5 seconds'`)
	fp := learnGroup(t, store, outageMessage("payments-3.eu-west-1", "ord_3DZ6VXS7", "someone@example.com"))
	insertGroupLetters(t, db, fp, 20_000, `'connect to payments-' || (g % 4) || '.eu-west-1:443 failed for order ord_' || g || ' of x' || g || '@example.com'`,
		`now() - interval '7 days' - g * interval '1 second'`)
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	week := time.Now().Add(-7 * 24 * time.Hour)
	for _, c := range []struct {
		name string
		q    string
		args []any
		// indexes are those the read may use, one of them; max is how
		// many letters it may read.
		indexes string
		max     float64
	}{
		{"NewestMessages", groups.GroupVariableLettersSQL, []any{fp, dlq.GroupVariablesSample},
			"dead_letters_fingerprint_idx", dlq.GroupVariablesSample},
		// The window's letters, of this group or of any: the planner
		// chooses by the numbers of each.
		{"PerMinute", groups.GroupMinutelySQL, []any{fp, week.Add(-time.Hour), week},
			"dead_letters_fingerprint_idx dead_letters_failed_idx", 3600 + 1},
	} {
		var raw string
		if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, FORMAT JSON) `+c.q, c.args...); err != nil {
			t.Fatal(err)
		}
		if got := indexesOfPlan(t, raw); len(got) != 1 || !slices.Contains(strings.Fields(c.indexes), got[0]) {
			t.Errorf("%s reads the indexes %v, want one of %s", c.name, got, c.indexes)
		}
		_, read := scansOfLetters(t, raw, "")
		if n := read["dead_letter_records"]; n > c.max {
			t.Errorf("%s read %.0f letters, want at most %.0f", c.name, n, c.max)
		}
	}
}

// indexesOfPlan returns the indexes an EXPLAIN (FORMAT JSON) plan reads,
// "seq scan" for a sequential scan of a letters' table.
func indexesOfPlan(t *testing.T, raw string) []string {
	t.Helper()
	type node struct {
		NodeType string `json:"Node Type"`
		Relation string `json:"Relation Name"`
		Index    string `json:"Index Name"`
		Plans    []node `json:"Plans"`
	}
	var plans []struct {
		Plan node `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n node)
	walk = func(n node) {
		switch {
		case n.Index != "":
			out = append(out, n.Index)
		case n.NodeType == "Seq Scan" && letterTables[n.Relation]:
			out = append(out, "seq scan")
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return out
}
