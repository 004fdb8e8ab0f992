package replay

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redrive/redrive/dlq"
)

// OperationStore is what the Runner needs from the store's operations room.
type OperationStore interface {
	RunnableOperations(ctx context.Context) ([]int64, error)
	RunOperationLane(ctx context.Context, opID int64, lane, lanes, batchSize int, now time.Time) (dlq.BatchResult, error)
	FailOperation(ctx context.Context, opID int64, cause string, now time.Time) error
	FollowOperations(ctx context.Context, now time.Time) (int, error)
	// SendSourceReplays and FollowSourceReplays send the replays queued
	// for other systems (River) and follow them there.
	SendSourceReplays(ctx context.Context) (int, error)
	FollowSourceReplays(ctx context.Context) error
}

// maxBatchFailures is how many times in a row an operation's batch may
// fail before the operation is stopped as failed. A passing hiccup (a
// deadlock victim, a restart) fails once or twice; at a poll a second,
// five failures in a row means the batch itself cannot succeed.
const maxBatchFailures = 5

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Store  OperationStore
	Logger *slog.Logger
	// BatchSize is how many letters one transaction handles; default 2000:
	// big enough that 100,000 letters take ~50 round trips, small enough
	// that each transaction holds its row locks for well under a second.
	BatchSize int
	// PollInterval is how often the runner looks for work when not woken;
	// it is also how a second console process picks up operations after a
	// crash of the first. Default 1s.
	PollInterval time.Duration
	// FollowInterval is how often the replays of the operations in flight
	// are counted (their settled bar, their died-again guard); default
	// PollInterval, at most a second, so that a long poll does not leave
	// an operation settling long after its last replay ran.
	FollowInterval time.Duration
	// SendInterval is how often the replays queued for other systems are
	// looked at when they fall due; default 200 ms, the resolution of their
	// pace.
	SendInterval time.Duration
	// Lanes is how many batches of one operation run at once (default
	// dlq.OperationLanes); paced operations and canaries run one at a time
	// whatever it says.
	Lanes int
	Now   func() time.Time
}

// Runner carries out bulk operations in the background, batch by batch, so
// a large operation never holds an HTTP request open. Every console process
// may run one: operations are locked per batch, and a crashed process's
// operations resume in whichever runner looks next.
type Runner struct {
	cfg  RunnerConfig
	wake chan struct{}
	// failures counts each lane's batch failures in a row. Only the
	// lanes' goroutines touch it, under mu.
	mu       sync.Mutex
	failures map[laneKey]int
}

type laneKey struct {
	op   int64
	lane int
}

// NewRunner returns a Runner.
func NewRunner(cfg RunnerConfig) *Runner {
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 2000)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.FollowInterval = cmp.Or(cfg.FollowInterval, min(cfg.PollInterval, time.Second))
	cfg.SendInterval = cmp.Or(cfg.SendInterval, 200*time.Millisecond)
	cfg.Lanes = max(cmp.Or(cfg.Lanes, dlq.OperationLanes), 1)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg, wake: make(chan struct{}, 1), failures: map[laneKey]int{}}
}

// Wake tells the runner there is new work; it never blocks.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run works on operations, and follows their replays, until ctx ends. A
// batch in flight when ctx ends rolls back whole and is redone later.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { r.follow(ctx) })
	wg.Go(func() { r.send(ctx) })
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		}
		r.runAll(ctx)
		timer.Reset(r.cfg.PollInterval)
	}
}

// follow counts the replays of the operations not finished once every
// FollowInterval, in its own loop: a large operation's batches keep runAll
// busy for a while, and its settled bar (and guard) must move meanwhile.
func (r *Runner) follow(ctx context.Context) {
	tick := time.NewTicker(r.cfg.FollowInterval)
	defer tick.Stop()
	for {
		if err := r.cfg.Store.FollowSourceReplays(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("follow replays in their sources", "err", err)
		}
		if _, err := r.cfg.Store.FollowOperations(ctx, r.cfg.Now()); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("follow operations", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// send sends the replays queued for other systems as they fall due, in
// its own loop: a paced replay's are due a few at a time, and a large one
// unpaced keeps it busy while batches and follow-through go on.
func (r *Runner) send(ctx context.Context) {
	tick := time.NewTicker(r.cfg.SendInterval)
	defer tick.Stop()
	for {
		if _, err := r.cfg.Store.SendSourceReplays(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("send replays to their sources", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *Runner) runAll(ctx context.Context) {
	ids, err := r.cfg.Store.RunnableOperations(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Error("list operations", "err", err)
		}
		return
	}
	for _, id := range ids {
		r.runOne(ctx, id)
	}
}

// runOne runs the lanes of one operation, each batch after batch while it
// has work, and returns when all of them stop. Operations take turns only
// between runAll passes; one large operation runs to its end first, which
// keeps each operation's pace origin meaningful.
func (r *Runner) runOne(ctx context.Context, id int64) {
	var wg sync.WaitGroup
	for lane := range r.cfg.Lanes {
		wg.Go(func() { r.runLane(ctx, id, lane) })
	}
	wg.Wait()
}

// runLane runs batches of one lane back to back, without pausing: a paced
// operation's pace is in its jobs' run_at, not in the runner.
func (r *Runner) runLane(ctx context.Context, id int64, lane int) {
	key := laneKey{id, lane}
	for ctx.Err() == nil {
		res, err := r.cfg.Store.RunOperationLane(ctx, id, lane, r.cfg.Lanes, r.cfg.BatchSize, r.cfg.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.failures[key]++
			failures := r.failures[key]
			if failures >= maxBatchFailures {
				delete(r.failures, key)
			}
			r.mu.Unlock()
			if failures < maxBatchFailures {
				r.cfg.Logger.Error("operation batch failed; will retry", "operation_id", id, "lane", lane, "failures", failures, "err", err)
				return
			}
			// The same batch failing again and again, with the database
			// there to say so, is not going to pass: stop the operation
			// and say why on its page, rather than show "running" forever.
			r.cfg.Logger.Error("operation batch keeps failing; stopping the operation", "operation_id", id, "err", err)
			if ferr := r.cfg.Store.FailOperation(ctx, id, err.Error(), r.cfg.Now()); ferr != nil {
				r.cfg.Logger.Error("stop failing operation", "operation_id", id, "err", ferr)
			}
			return
		}
		r.mu.Lock()
		delete(r.failures, key)
		r.mu.Unlock()
		if res.Finished || res.State != dlq.OpRunning || (res.Acted == 0 && res.Skipped == 0) {
			if res.Finished {
				r.cfg.Logger.Info("operation finished", "operation_id", id)
			} else if res.State == dlq.OpSettling {
				r.cfg.Logger.Info("operation enqueued; following its replays", "operation_id", id)
			}
			return
		}
	}
}
