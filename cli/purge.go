package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/queue"
)

func runPurge(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("purge", "Retention. --older-than deletes dead letters replayed or discarded longer ago\n"+
		"than that (pending letters are never deleted; each batch is audited), except\n"+
		"those of groups with a new letter in the last hour: held until an operator\n"+
		"confirms on the console's overview, or the group stops growing.\n"+
		"--processed-events-older-than forgets the event ids worker.ProcessOnce\n"+
		"recorded: past that age a redelivered event would apply again, so keep it\n"+
		"far longer than any redelivery takes (weeks). At least one is required.", e.stderr)
	register(fs, databaseOptions, []string{"older-than", "processed-events-older-than", "actor"})
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	olderThan, eventsOlderThan, actor := f.str("older-than"), f.str("processed-events-older-than"), f.str("actor")
	if olderThan == "" && eventsOlderThan == "" {
		fs.Usage()
		return usagef("give --older-than, --processed-events-older-than or both")
	}
	var letterAge, eventAge time.Duration
	for _, a := range []struct {
		flag, value string
		age         *time.Duration
	}{{"older-than", olderThan, &letterAge}, {"processed-events-older-than", eventsOlderThan, &eventAge}} {
		if a.value == "" {
			continue
		}
		age, err := parseAge(a.value)
		if err != nil {
			fs.Usage()
			return usagef("--%s: %v", a.flag, err)
		}
		*a.age = age
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	if letterAge > 0 {
		n, holds, err := operations.New(db, groups.New(db)).PurgeSettled(ctx, dlq.PurgeParams{
			OlderThan: letterAge, Now: time.Now(), Actor: dlq.Actor{Name: actor, UserAgent: "redrive purge"},
		})
		fmt.Fprintf(e.stdout, "purged %d settled dead letters older than %s\n", n, olderThan)
		for _, h := range holds {
			fmt.Fprintf(e.stdout, "held %d letters of group %s (%s): it had a new letter within %s; confirm on the console's overview\n",
				h.Letters, h.Fingerprint, h.Task, dlq.PurgeGrowingWindow)
		}
		if err != nil {
			return err
		}
	}
	if eventAge > 0 {
		n, err := queue.New(db, groups.New(db)).PurgeProcessedEvents(ctx, eventAge, time.Now())
		fmt.Fprintf(e.stdout, "purged %d processed event ids older than %s\n", n, eventsOlderThan)
		if err != nil {
			return err
		}
	}
	return nil
}

// parseAge reads a retention age: Go durations plus days (d) and weeks (w).
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("required")
	}
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[s[len(s)-1]]
	if unit == 0 {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a positive age like 30d, 12w or 720h", s)
		}
		return d, nil
	}
	var n int
	if _, err := fmt.Sscanf(s[:len(s)-1], "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != s[:len(s)-1] {
		return 0, fmt.Errorf("%q is not a positive age like 30d, 12w or 720h", s)
	}
	return time.Duration(n) * unit, nil
}
