package remote

import (
	"net/http"
	"strings"
	"testing"
)

// TestThrottles sets, lists, changes and lifts a throttle through a real
// console, as an on-call engineer would from a terminal, and checks each
// command's refusal of bad input.
func TestThrottles(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	if out, err := c.run(t, "throttles", "list"); err != nil || !strings.Contains(out, "Nothing is throttled.") {
		t.Fatalf("list with none: %v\n%s", err, out)
	}
	out, err := c.run(t, "throttles", "set", "--task", "billing.charge", "--max-running", "3", "--reason", "provider rate-limits us", "--for", "1h")
	if err != nil || !strings.Contains(out, "billing.charge to 3 running") {
		t.Fatalf("set: %v\n%s", err, out)
	}
	out, err = c.run(t, "throttles", "list")
	if err != nil || !strings.Contains(out, "task billing.charge") || !strings.Contains(out, "3 running") || !strings.Contains(out, "olga") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	// A change keeps what it leaves out: the running limit, the reason.
	out, err = c.run(t, "throttles", "change", "1", "--max-per-second", "0.5")
	if err != nil || !strings.Contains(out, "now to 3 running, 0.5/s") {
		t.Fatalf("change: %v\n%s", err, out)
	}
	var reason string
	if err := c.db.Get(&reason, `SELECT reason FROM throttles WHERE id = 1`); err != nil || reason != "provider rate-limits us" {
		t.Fatalf("the change replaced the reason with %q (%v)", reason, err)
	}
	_, err = c.run(t, "throttles", "set", "--task", "billing.charge", "--max-running", "1", "--reason", "again")
	apiError(t, err, http.StatusConflict, "conflict")
	_, err = c.run(t, "throttles", "set", "--task", "billing.charge", "--reason", "no limit")
	apiError(t, err, http.StatusBadRequest, "invalid")
	if _, err := c.run(t, "throttles", "set", "--max-running", "1", "--reason", "what?"); err == nil || !strings.Contains(err.Error(), "give --task or --queue") {
		t.Fatalf("set without a target: %v", err)
	}
	if out, err := c.run(t, "throttles", "lift", "1", "--reason", "provider recovered"); err != nil || !strings.Contains(out, "Lifted throttle 1") {
		t.Fatalf("lift: %v\n%s", err, out)
	}
	_, err = c.run(t, "throttles", "lift", "1")
	apiError(t, err, http.StatusConflict, "conflict")
	if n := c.count(t, `SELECT count(*) FROM audit_events WHERE action LIKE 'throttle%' AND actor = 'olga'`); n != 3 {
		t.Fatalf("%d audit entries by olga, want 3 (throttle, change, lift)", n)
	}
}
