package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// The schedules, as an on-call engineer lists them and turns one off and
// on again from a terminal.
func TestSchedules(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	ctx := context.Background()
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	if _, err := c.store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{{Name: "billing.nightly", Cron: "0 3 * * *",
		Timezone: "Europe/Berlin", Task: "billing.charge", Queue: "default", Args: []byte(`[]`), Kwargs: []byte(`{}`),
		MaxAttempts: 1, NextRunAt: at}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.Queue.EnqueueOccurrence(ctx, "billing.nightly", at, at.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	out, err := c.run(t, "schedules", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SCHEDULE") || !strings.Contains(lines[1], "0 3 * * * (Europe/Berlin)") ||
		!strings.Contains(lines[1], "enabled") || !strings.Contains(lines[1], "(job ") {
		t.Errorf("schedules list:\n%s", out)
	}

	if _, err := c.run(t, "schedules", "disable", "billing.nightly"); !errors.As(err, new(*UsageError)) {
		t.Errorf("disable without --reason: %v, want a usage error", err)
	}
	out, err = c.run(t, "schedules", "disable", "billing.nightly", "--reason", "bills twice")
	if err != nil || !strings.Contains(out, "Schedule billing.nightly disabled") {
		t.Fatalf("disable: %q %v", out, err)
	}
	if _, err := c.run(t, "schedules", "disable", "billing.nightly", "--reason", "again"); err == nil || !strings.Contains(err.Error(), "already disabled") {
		t.Errorf("disable twice: %v, want the conflict in words", err)
	}
	if _, err := c.run(t, "schedules", "enable", "nope", "--reason", "r"); err == nil || !strings.Contains(err.Error(), "No schedule") {
		t.Errorf("enable an unknown schedule: %v", err)
	}
	out, err = c.run(t, "schedules", "list", "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list []Schedule
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].Enabled || *list[0].ChangedBy == "" {
		t.Errorf("schedules as JSON: %+v (err %v)", list, err)
	}
	if out, err := c.run(t, "schedules", "enable", "billing.nightly", "--reason", "fixed"); err != nil || !strings.Contains(out, "enabled") {
		t.Errorf("enable: %q %v", out, err)
	}
	if n := c.count(t, `SELECT count(*) FROM audit_events WHERE action IN ('schedule_disable', 'schedule_enable')`); n != 2 {
		t.Errorf("%d audit entries, want 2", n)
	}
}
