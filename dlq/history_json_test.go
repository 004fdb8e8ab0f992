package dlq_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// Migration 00039 stores the history as json: letters written before it
// read back the same after it, and after its Down; a long attempt
// traceback is still cut on the detail page; and the column keeps lz4.
func TestHistoryAsJSONMigrationKeepsHistories(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	p := migrationsOf(t, db)
	columnType := func() (typ, compression string) {
		t.Helper()
		err := db.QueryRow(`SELECT atttypid::regtype::text, attcompression::text FROM pg_attribute
			WHERE attrelid = 'dead_letter_records'::regclass AND attname = 'history'`).Scan(&typ, &compression)
		if err != nil {
			t.Fatal(err)
		}
		return typ, compression
	}
	if typ, compression := columnType(); typ != "json" || compression != "l" {
		t.Fatalf("history is %s compressed %q; want json with lz4", typ, compression)
	}

	if _, err := p.DownTo(ctx, 38); err != nil {
		t.Fatalf("down to 38: %v", err)
	}
	if typ, _ := columnType(); typ != "jsonb" {
		t.Fatalf("below 00039 history is %s; want jsonb", typ)
	}
	failedAt := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	long := strings.Repeat("frame\n", dlq.AttemptTracebackCap)
	if _, err := store.LoadDeadLetters(ctx, 2, func(i int) dlq.DeadLetter {
		l := loadedLetter(i, failedAt)
		l.History = dlq.Attempts{
			{Attempt: 1, At: failedAt.Add(-time.Minute), Outcome: dlq.OutcomeRetry, Class: "Timeout",
				Message: `upstream "slow" ✓`, Traceback: long},
			l.History[0],
		}
		l.History[1].Attempt = 2
		return l
	}); err != nil {
		t.Fatal(err)
	}
	// Read as text, so that one query serves both schemas.
	histories := func() []dlq.Attempts {
		t.Helper()
		var texts []string
		if err := db.Select(&texts, `SELECT history::text FROM dead_letter_records ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		out := make([]dlq.Attempts, len(texts))
		for i, text := range texts {
			if err := json.Unmarshal([]byte(text), &out[i]); err != nil {
				t.Fatalf("history %q: %v", text, err)
			}
		}
		return out
	}
	before := histories()
	if len(before) != 2 || len(before[0]) != 2 || before[0][0].Traceback != long {
		t.Fatalf("below 00039 the histories are %+v; want 2 of 2 attempts", before)
	}
	checkSame := func(step string) {
		t.Helper()
		if after := histories(); !reflect.DeepEqual(after, before) {
			t.Errorf("%s: histories %+v; want %+v", step, after, before)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if typ, compression := columnType(); typ != "json" || compression != "l" {
		t.Fatalf("after 00039 history is %s compressed %q; want json with lz4", typ, compression)
	}
	checkSame("after 00039")
	var id int64
	if err := db.Get(&id, `SELECT min(id) FROM dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	d, err := store.GetDeadLetter(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 2 || !strings.HasSuffix(d.History[0].Traceback, mask.TruncatedMark) ||
		len(d.History[0].Traceback) >= len(long) || !reflect.DeepEqual(d.History[1], before[0][1]) {
		t.Errorf("the detail's history is %+v; want the first traceback cut, the second attempt whole", d.History)
	}
	if _, err := p.DownTo(ctx, 38); err != nil {
		t.Fatalf("down to 38 again: %v", err)
	}
	checkSame("after 00039's Down")
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
