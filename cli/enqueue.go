package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/queue"
)

func runEnqueue(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("enqueue", "Enqueue one job and print it as JSON. With --key, enqueueing the same key\nagain returns the first job instead of a new one.", e.stderr)
	register(fs, databaseOptions, []string{"task", "queue", "args", "kwargs", "key", "max-attempts", "timeout"})
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	p := dlq.EnqueueParams{Task: f.str("task"), Queue: f.str("queue"), IdempotencyKey: f.str("key"),
		MaxAttempts: f.integer("max-attempts"), Timeout: f.duration("timeout"),
		Args: json.RawMessage(f.str("args")), Kwargs: json.RawMessage(f.str("kwargs"))}
	if p.Task == "" {
		fs.Usage()
		return usagef("--task is required")
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := queue.New(db, groups.New(db)).Enqueue(ctx, p)
	if err != nil {
		return err
	}
	if res.Existing {
		fmt.Fprintf(e.stderr, "key %q was used before: returning existing job %d\n", p.IdempotencyKey, res.Job.ID)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res.Job)
}
