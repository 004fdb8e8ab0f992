package remote

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// A task's timings and the retention forecast, read from a terminal, and
// a held purge confirmed there.
func TestTasksAndRetention(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	ctx := context.Background()
	if _, err := c.store.DB.ExecContext(ctx, `
		INSERT INTO task_timings (task, span, start_at, runs, failures, dead, wait, run) VALUES
			('billing.charge', 'minute', date_trunc('minute', now()), 120, 9, 2, '{0,0,0,40,60,20}', '{0,0,0,0,0,0,0,0,0,0,100,15,5}'),
			('billing.charge', 'hour', date_trunc('hour', now()), 120, 9, 2, '{0,0,0,40,60,20}', '{0,0,0,0,0,0,0,0,0,0,100,15,5}')`); err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, "tasks")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "TASK") || !strings.Contains(lines[1], "billing.charge") ||
		!strings.Contains(lines[1], "120") || !strings.Contains(lines[1], " ms") {
		t.Errorf("tasks:\n%s", out)
	}
	out, err = c.run(t, "tasks", "billing.charge", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var one []TaskTimings
	if err := json.Unmarshal([]byte(out), &one); err != nil || len(one) != 1 || len(one[0].Windows) != 3 ||
		one[0].Windows[0].Runs != 120 || one[0].Windows[0].DeadLetters != 2 || one[0].Windows[0].RunMS == nil {
		t.Errorf("one task as JSON: %s (err %v)", out, err)
	}
	// A task that never ran has windows of nothing, not an error.
	if out, err := c.run(t, "tasks", "no.such.task"); err != nil || !strings.Contains(out, "no.such.task  1h      0") {
		t.Errorf("a task that never ran: %q %v", out, err)
	}

	out, err = c.run(t, "retention")
	if err != nil || !strings.Contains(out, "No purge is held.") {
		t.Fatalf("retention with nothing held: %q %v", out, err)
	}
	if _, err := c.store.DB.ExecContext(ctx, `INSERT INTO purge_holds (fingerprint, task, letters, settled_before, held_at)
		VALUES ('00000000000000f0', 'billing.charge', 37, now() - interval '30 days', now() - interval '2 hours')`); err != nil {
		t.Fatal(err)
	}
	out, err = c.run(t, "retention", "show")
	if err != nil || !strings.Contains(out, "00000000000000f0") || !strings.Contains(out, "37") {
		t.Fatalf("retention with a hold: %q %v", out, err)
	}
	out, err = c.run(t, "retention", "confirm", "00000000000000f0")
	if err != nil || !strings.Contains(out, "Purged 0 settled letters of group 00000000000000f0") {
		t.Fatalf("confirm: %q %v", out, err)
	}
	if _, err := c.run(t, "retention", "confirm", "00000000000000f0"); err == nil {
		t.Error("a purge confirmed twice answered twice")
	}
	if n := c.count(t, `SELECT count(*) FROM purge_holds`); n != 0 {
		t.Errorf("%d holds left after the confirmation", n)
	}
}
