package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// 00108 rewrites the filters operations stored as query-string values into
// the filter's own JSON, each meaning what it meant (a missing status was
// pending, "all" every status, a comma list several groups), and its Down
// writes them back.
func TestOperationFiltersMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	p := migrationsOf(t, db)
	if _, err := p.DownTo(ctx, 107); err != nil {
		t.Fatalf("down to 107: %v", err)
	}
	old := map[string]string{
		"pending by task":  `{"task": ["billing.charge"], "since": ["2026-12-01T10:00:00Z"]}`,
		"every status":     `{"queue": ["payments"], "status": ["all"]}`,
		"several groups":   `{"fingerprint": ["00000000000000aa,00000000000000bb"], "reason": ["exhausted"]}`,
		"one group, found": `{"fingerprint": ["00000000000000cc"], "status": ["discarded"], "q": ["timeout"]}`,
	}
	want := map[string]dlq.Filter{
		"pending by task": {Task: "billing.charge", Status: dlq.StatusPending,
			Since: dlq.TimeBound{Raw: "2026-12-01T10:00:00Z", At: mustTime(t, "2026-12-01T10:00:00Z")}},
		"every status":     {Queue: "payments"},
		"several groups":   {Fingerprints: []string{"00000000000000aa", "00000000000000bb"}, Reason: dlq.ReasonExhausted, Status: dlq.StatusPending},
		"one group, found": {Fingerprint: "00000000000000cc", Status: dlq.StatusDiscarded, Q: "timeout"},
	}
	ids := map[string]int64{}
	for name, filter := range old {
		var id int64
		if err := db.Get(&id, `INSERT INTO operations (kind, actor, filter, max_id, matched) VALUES ('replay', 'olga', $1, 1, 1) RETURNING id`,
			filter); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	if _, err := p.UpTo(ctx, 108); err != nil {
		t.Fatalf("up to 108: %v", err)
	}
	for name, id := range ids {
		var raw json.RawMessage
		if err := db.Get(&raw, `SELECT filter FROM operations WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		got, err := dlq.Operation{Filter: &raw}.StoredSelection()
		if err != nil {
			t.Fatalf("%s: %s does not read as a filter: %v", name, raw, err)
		}
		if w := want[name]; !sameFilter(*got.Filter, w) {
			t.Errorf("%s: %s reads as %+v, want %+v", name, raw, *got.Filter, w)
		}
	}
	if _, err := p.DownTo(ctx, 107); err != nil {
		t.Fatalf("down to 107 again: %v", err)
	}
	for name, id := range ids {
		var same bool
		if err := db.Get(&same, `SELECT filter = $2::jsonb FROM operations WHERE id = $1`, id, old[name]); err != nil {
			t.Fatal(err)
		}
		if !same {
			t.Errorf("%s: the Down did not write back %s", name, old[name])
		}
	}
}

func sameFilter(a, b dlq.Filter) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
