// Package seed writes realistic synthetic dead letters in bulk, for
// benchmarks and the console demo (`redrive seed`): the tasks of a shop
// failing in about forty-five ways, with args, tracebacks, per-attempt
// history, a mix of statuses, each letter in the error group the worker
// would have put it in. It generates the letters; the store writes them
// (letters.Store.LoadDeadLetters), so the SQL stays in the store.
package seed

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
)

// batchSize is how many letters one COPY writes. Each batch is its own
// transaction: a long seed shows progress in the table as it goes, an
// interrupted one keeps what it wrote, and no transaction holds a million
// rows' worth of locks and WAL.
const batchSize = 100_000

// drawSpan is how many letters are drawn at once, sorted by failure time
// and cut into batches (about 64 bytes a letter until its batch is
// written). Each batch of a span is one stretch of time, so its index
// entries land together in every index keyed by failed_at, instead of
// every batch sweeping every leaf of every index: on a million letters,
// with the indexes several times shared_buffers, the sweeps made the
// server read each index leaf back about five times.
const drawSpan = 10 * batchSize

// maxParallel caps how many batches run at once.
const maxParallel = 4

// Loader is the store's bulk load of dead letters (its letters room).
type Loader interface {
	LoadDeadLetters(ctx context.Context, n int, letter func(i int) dlq.DeadLetter) (int, error)
	LoadSettledDeadLetters(ctx context.Context, n int, letter func(i int) dlq.DeadLetter) (int, error)
	IndexLoadedDeadLetters(ctx context.Context, connections int) (int64, error)
	AnalyzeDeadLetters(ctx context.Context) error
}

// Grouper assigns seeded letters to their error groups (the store's groups
// room).
type Grouper interface {
	// GroupLetter assigns a letter to its error group as the worker's
	// dead-lettering does (package grouping), learning from it.
	GroupLetter(ctx context.Context, l grouping.Letter) (string, error)
	// SweepMergedGroups moves letters written under a group that was
	// merged while they were on their way (a batch is grouped letter by
	// letter as it streams) into the surviving group.
	SweepMergedGroups(ctx context.Context) (int64, error)
}

// Options say how DeadLetters finishes.
type Options struct {
	// SearchLater leaves the letters' search rows to a second step: a
	// running console's indexer builds them in the background (the list
	// says how many letters are not yet searchable), or `redrive search
	// rebuild` builds them at once. Building them is about half of a
	// seed's time (the trigram index of each letter's text), and every
	// other page, count and action works on the letters without them.
	SearchLater bool
}

// DeadLetters writes n synthetic dead letters that failed in the 14 days
// before now, batchSize per transaction, a few batches at a time, then has
// the store build their search rows (unless opts.SearchLater) and refresh
// the planner's statistics. It returns how many letters it wrote (all of
// them unless it fails part way; batches that committed stay).
func DeadLetters(ctx context.Context, store Loader, groups Grouper, n int, now time.Time, opts Options) (int, error) {
	if n < 0 {
		return 0, &dlq.ValidationError{Fields: map[string]string{"n": "must not be negative"}}
	}
	cat, err := compileCatalog()
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	// The history's times are JSON text, the columns microseconds: both
	// must say the same instant.
	now = now.UTC().Truncate(time.Microsecond)
	// Most of the work is the server's (parsing, indexes, triggers), so
	// batches run side by side, one backend each, about one per core (for
	// a seed, client and server usually share the machine).
	workers := min(runtime.NumCPU(), maxParallel)
	inserted, err := inBatches(ctx, workers, cat.batches(n, now), func(ctx context.Context, b batch) (int, error) {
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		load := store.LoadDeadLetters
		if b.settled {
			load = store.LoadSettledDeadLetters
		}
		var groupErr error
		rows, err := load(ctx, len(b.draws), func(i int) dlq.DeadLetter {
			l := cat.letter(r, b.draws[i], i, now)
			if groupErr == nil {
				l.Fingerprint, groupErr = groups.GroupLetter(ctx, grouping.Letter{
					Task: l.Task, Class: l.ErrorClass, Message: l.ErrorMessage, Traceback: l.Traceback})
			}
			return l
		})
		return rows, cmp.Or(err, groupErr)
	})
	if err != nil {
		return inserted, fmt.Errorf("seed: %w", err)
	}
	if _, err := groups.SweepMergedGroups(ctx); err != nil {
		return inserted, fmt.Errorf("seed: %w", err)
	}
	if opts.SearchLater {
		err = store.AnalyzeDeadLetters(ctx)
	} else {
		_, err = store.IndexLoadedDeadLetters(ctx, workers)
	}
	if err != nil {
		return inserted, fmt.Errorf("seed: %w", err)
	}
	return inserted, nil
}

// inBatches calls insert for every batch produce sends, on workers
// goroutines, and returns how many rows the calls reported. The first
// error cancels the context produce and the other calls are given, stops
// the batches not yet started, and is returned.
func inBatches[B any](ctx context.Context, workers int, produce func(context.Context, chan<- B), insert func(context.Context, B) (int, error)) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan B)
	go func() {
		defer close(batches)
		produce(ctx, batches)
	}()
	var (
		mu       sync.Mutex
		inserted int
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for batch := range batches {
				rows, err := insert(ctx, batch)
				mu.Lock()
				inserted += rows
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return inserted, firstErr
}

// compiledFailure is a failure of the catalog with its templates parsed.
// Its letters' error group is not decided here: each letter is grouped
// from its own filled-in message and traceback, as the worker groups
// them (Loader.GroupLetter).
type compiledFailure struct {
	failure
	task                                   task
	message, traceback, args, kwargs, keys template
	uses                                   []int // indexes of the values its templates use
}

// compiled is the catalog ready to draw from.
type compiled struct {
	failures []compiledFailure
	// slots holds each failure's index weight times: a uniform pick from
	// it is a weighted pick of a failure.
	slots []int
}

func compileCatalog() (compiled, error) {
	byName := make(map[string]task, len(tasks))
	for _, t := range tasks {
		byName[t.name] = t
	}
	var c compiled
	for i, f := range failures {
		t, ok := byName[f.task]
		if !ok {
			return c, fmt.Errorf("failure %d: unknown task %q", i, f.task)
		}
		cf := compiledFailure{failure: f, task: t}
		var err error
		for _, p := range []struct {
			dst  *template
			tmpl string
		}{
			{&cf.message, f.message}, {&cf.traceback, f.traceback(t)}, {&cf.args, t.args},
			{&cf.kwargs, cmp.Or(f.kwargs, t.kwargs)}, {&cf.keys, t.idempotencyKey},
		} {
			if *p.dst, err = parseTemplate(p.tmpl); err != nil {
				return c, fmt.Errorf("failure %d (%s %s): %w", i, f.task, f.class, err)
			}
			for _, ref := range p.dst.refs {
				if !slices.Contains(cf.uses, ref) {
					cf.uses = append(cf.uses, ref)
				}
			}
		}
		c.failures = append(c.failures, cf)
		for range f.weight {
			c.slots = append(c.slots, i)
		}
	}
	return c, nil
}

// batch is the draws of one load: all pending, or all settled (replayed
// or discarded), which the store loads without pending rows
// (letters.Store.LoadSettledDeadLetters).
type batch struct {
	draws   []draw
	settled bool
}

// batches produces the draws of n letters, at most batchSize a batch:
// drawSpan letters are drawn at once, sorted by failure time, parted into
// the pending and the settled, and each part cut in order, so every batch
// is a stretch of time. The two parts' batches go out oldest first.
func (c compiled) batches(n int, now time.Time) func(context.Context, chan<- batch) {
	return func(ctx context.Context, out chan<- batch) {
		r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		for left := n; left > 0; left -= drawSpan {
			draws := c.draw(r, min(left, drawSpan), now)
			nPending := 0
			for _, d := range draws {
				if d.pending() {
					nPending++
				}
			}
			pending, settled := make([]draw, 0, nPending), make([]draw, 0, len(draws)-nPending)
			for _, d := range draws {
				if d.pending() {
					pending = append(pending, d)
				} else {
					settled = append(settled, d)
				}
			}
			var cut []batch
			for _, part := range []batch{{draws: pending}, {draws: settled, settled: true}} {
				for draws := part.draws; len(draws) > 0; draws = draws[min(len(draws), batchSize):] {
					cut = append(cut, batch{draws: draws[:min(len(draws), batchSize)], settled: part.settled})
				}
			}
			slices.SortStableFunc(cut, func(a, b batch) int { return cmp.Compare(a.draws[0].failedAtMicro, b.draws[0].failedAtMicro) })
			for _, b := range cut {
				select {
				case out <- b:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// draw is what decides a letter's place in time, drawn for a whole span
// first so its batches can go in oldest first (see batches and letter).
type draw struct {
	failure int
	// failedAtMicro is when the letter failed, in microseconds since the
	// Unix epoch: a number, not a time.Time, so a span's million draws
	// sort fast and hold no pointer for the collector to follow (the
	// seed's first batch waits for its span's sort).
	failedAtMicro         int64
	statusRoll, actedRoll float64
	backoffMS, queuedMS   int64
}

// failedAt is when the letter of d failed, in UTC.
func (d draw) failedAt() time.Time { return time.UnixMicro(d.failedAtMicro).UTC() }

// pendingShare is the share of letters still pending; the others were
// replayed or discarded.
const pendingShare = 0.70

// pending reports whether the letter of d is still pending.
func (d draw) pending() bool { return d.statusRoll < pendingShare }

// draw draws n letters' failures and times, oldest first. Letters go in
// oldest first so that within a batch ids rise with failed_at as they do
// when a worker dead-letters them: a time window ("since the incident
// began") is a few runs of neighbouring rows, one per batch, not one row
// in ten all over the table. Sorted input is also cheaper to index: every
// index but the two on ids has failed_at in its key.
func (c compiled) draw(r *rand.Rand, n int, now time.Time) []draw {
	draws := make([]draw, n)
	for i := range draws {
		f := c.slots[r.IntN(len(c.slots))]
		age := r.Float64()
		d := draw{failure: f, statusRoll: r.Float64(), actedRoll: r.Float64(),
			backoffMS: 5000 + r.Int64N(10000), queuedMS: r.Int64N(120000)}
		// Spread over the 14 days before now, weighted toward recent
		// (age = 14 days * u²); an incident fails only inside its window.
		ago := time.Duration(14 * 24 * float64(time.Hour) * age * age)
		if k := c.failures[f]; k.burstSpan > 0 {
			ago = k.burstAgo - time.Duration(age*float64(k.burstSpan))
		}
		d.failedAtMicro = now.Add(-ago).UnixMicro()
		draws[i] = d
	}
	slices.SortFunc(draws, func(a, b draw) int { return cmp.Compare(a.failedAtMicro, b.failedAtMicro) })
	return draws
}

// Who acted on the letters that are no longer pending, and why.
var (
	operators      = []string{"priya.sharma@acme-corp.com", "tom.becker@acme-corp.com", "ana.lima@acme-corp.com", "oncall-bot"}
	discardReasons = []string{
		"duplicate of an order that was charged later",
		"customer deleted their account",
		"superseded by a newer sync",
		"test data from the staging import",
		"handled by hand: refunded and emailed the customer",
		"endpoint owner asked us to stop retrying",
	}
	// A letter's hosts and worker processes (host-pid, one per host)
	// follow from (letter, attempt) rather than chance: a worker process
	// keeps its pid, and a retry lands on another worker.
	hosts       = []string{"worker-7d9f4c-x2kqp", "worker-7d9f4c-m8zt1", "worker-7d9f4c-q4hnv", "worker-7d9f4c-b7wcs", "worker-7d9f4c-t1rjd", "worker-7d9f4c-9gk2f"}
	workerNames = []string{"worker-7d9f4c-x2kqp-7", "worker-7d9f4c-m8zt1-8", "worker-7d9f4c-q4hnv-7", "worker-7d9f4c-b7wcs-12", "worker-7d9f4c-t1rjd-7", "worker-7d9f4c-9gk2f-9"}
	rescuers    = []string{"worker-7d9f4c-x2kqp-7", "worker-7d9f4c-q4hnv-7"}
)

// letter is the g-th letter of a batch, from its draw.
//
// Shape of a letter, and why:
//   - attempts: permanent fails on the first attempt; exhausted and
//     lease_expired used every attempt (the rescuer dead-letters a job only
//     on its last). History has one entry per attempt, spaced by a backoff
//     that doubles from the letter's base delay, so the first attempt was
//     at failed_at - base * (2^(attempts-1) - 1).
//   - The traceback is kept on the letter, not repeated in every history
//     entry: ten copies of a 1.5 kB traceback would triple the table.
//   - status: 70% pending; permanent failures are mostly discarded, the
//     others mostly replayed, between the failure and now, usually soon after.
func (c compiled) letter(r *rand.Rand, d draw, g int, now time.Time) dlq.DeadLetter {
	f := c.failures[d.failure]
	failedAt := d.failedAt()
	drawn := make([]string, len(values))
	for _, i := range f.uses {
		drawn[i] = values[i].draw(r, now)
	}
	attempts := f.task.maxAttempts
	if f.reason == dlq.ReasonPermanent {
		attempts = 1
	}
	l := dlq.DeadLetter{
		Queue: f.task.queue, Task: f.task.name,
		Args: []byte(f.args.fill(drawn)), Kwargs: []byte(f.kwargs.fill(drawn)),
		ErrorClass: f.class, ErrorMessage: f.message.fill(drawn), Traceback: f.traceback.fill(drawn),
		Attempts: attempts, MaxAttempts: f.task.maxAttempts, Reason: f.reason,
		WorkerVersion: versionAt(failedAt, now),
		EnqueuedAt:    failedAt.Add(-time.Duration(d.backoffMS*(1<<(attempts-1)-1)+d.queuedMS) * time.Millisecond),
		FailedAt:      failedAt,
	}
	if key := f.keys.fill(drawn); key != "" {
		l.IdempotencyKey = &key
	}
	replayedShare := 0.92
	if f.reason == dlq.ReasonPermanent {
		replayedShare = 0.76
	}
	acted := failedAt.Add(time.Duration(float64(now.Sub(failedAt)) * d.actedRoll * d.actedRoll * d.actedRoll)).Truncate(time.Microsecond)
	operator := operators[r.IntN(len(operators))]
	switch {
	case d.pending():
	case d.statusRoll < replayedShare:
		l.ReplayedAt, l.ReplayedBy = &acted, &operator
	default:
		why := discardReasons[r.IntN(len(discardReasons))]
		l.DiscardedAt, l.DiscardedBy, l.DiscardReason = &acted, &operator, &why
	}
	l.History = make(dlq.Attempts, 0, attempts)
	for n := 1; n <= attempts; n++ {
		at := failedAt.Add(-time.Duration(d.backoffMS*(1<<(attempts-1)-1<<(n-1))) * time.Millisecond)
		slot := (g + n*5) % len(hosts)
		a := dlq.Attempt{Attempt: n, At: at, Host: hosts[slot], Worker: workerNames[slot],
			Version: versionAt(at, now), Class: f.class, Message: l.ErrorMessage, Outcome: dlq.OutcomeRetry}
		switch {
		case n == attempts:
			a.Outcome = dlq.OutcomeDead
		case f.reason == dlq.ReasonLeaseExpired:
			a.Outcome = dlq.OutcomeLeaseExpired
		}
		if f.reason == dlq.ReasonLeaseExpired {
			a.Message += fmt.Sprintf(" (held by %s, expired %s, rescued by %s)", a.Worker,
				at.Add(-31*time.Second).Format("2006-01-02T15:04:05Z"), rescuers[(g+n)%len(rescuers)])
		}
		if n < attempts {
			a.RetryInMS = d.backoffMS << (n - 1)
		}
		l.History = append(l.History, a)
	}
	return l
}

// releases are the worker versions that wrote the letters, newest first;
// each ran from since before now until the next one. The newest arrived
// with the reports.generate KeyError incident.
var releases = []struct {
	version string
	since   time.Duration
}{
	{"v1.15.0", deployAgo},
	{"v1.14.2", 9 * 24 * time.Hour},
	{"v1.14.1", 0}, // everything older
}

// versionAt is the version that was running at t.
func versionAt(t, now time.Time) string {
	for _, r := range releases[:len(releases)-1] {
		if !t.Before(now.Add(-r.since)) {
			return r.version
		}
	}
	return releases[len(releases)-1].version
}
