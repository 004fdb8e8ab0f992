package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// action is what the worker does with a job after one attempt.
type action int

const (
	actComplete   action = iota // record success
	actRetry                    // record the failure, run again after delay
	actDeadLetter               // record the failure, move to dead letters
	actHandBack                 // shutdown: give the attempt back, requeue now
	actDiscard                  // lease lost: the job is another worker's now
)

type decision struct {
	act    action
	reason dlq.Reason    // for actDeadLetter
	delay  time.Duration // for actRetry
}

// decide maps one attempt's result to what happens next. stop is the cause
// the job's context was cancelled with by the worker (errShutdown,
// errLeaseLost), or nil. It is pure so the rules can be tested as a table.
func decide(attempt, maxAttempts int, err, stop error, retryDelay func(attempt int) time.Duration) decision {
	switch {
	case err == nil:
		// Even when interrupted: the work is done, and saying so is safe.
		return decision{act: actComplete}
	case errors.Is(stop, errLeaseLost):
		return decision{act: actDiscard}
	case cancelRequest(stop) != nil:
		// An operator cancelled the attempt (cancel.go): whatever the
		// handler returned, it did not finish.
		if cancelRequest(stop).req.Retry && attempt < maxAttempts {
			return decision{act: actRetry, delay: retryDelay(attempt)}
		}
		return decision{act: actDeadLetter, reason: dlq.ReasonCancelled}
	case errors.Is(stop, errShutdown):
		// The failure is most likely the cancellation itself, which is not
		// the job's fault.
		return decision{act: actHandBack}
	case isPermanent(err):
		return decision{act: actDeadLetter, reason: dlq.ReasonPermanent}
	case attempt >= maxAttempts:
		return decision{act: actDeadLetter, reason: dlq.ReasonExhausted}
	default:
		return decision{act: actRetry, delay: retryDelay(attempt)}
	}
}

// execute runs one claimed job and records its outcome. It runs on a
// runner (dispatch); the job is counted in w.jobs, which the outcome's
// recording releases; cancel ends the job's context once it has.
//
// It reports whether the handler was abandoned (see runHandler): its
// goroutine is then the handler's, to finish whenever it does, and no
// longer one of the worker's runners.
func (w *Worker) execute(ctx context.Context, cancel context.CancelCauseFunc, a *activeJob) (abandoned bool) {
	a.log.init(w.log, &a.job)
	log := &a.log
	start := w.cfg.NowFunc()
	done := func(err error) {
		defer w.jobs.Done()
		defer cancel(nil)
		w.record(ctx, a, log, start, err)
	}
	t, ok := w.tasks[a.job.Task]
	if !ok {
		done(Permanent(&unknownTaskError{task: a.job.Task, worker: w.cfg.ID, known: w.taskNames}))
		return false
	}
	return w.runHandler(ctx, t, a, log, done)
}

// record decides what becomes of a job whose handler returned err (or was
// abandoned with it) and hands the outcome to the completer.
func (w *Worker) record(ctx context.Context, a *activeJob, log *jobLog, start time.Time, err error) {
	job := a.job
	// Why the worker cancelled the job, read the moment the handler
	// returned: a shutdown that cancels it only later must not turn a
	// finished failure into a hand-back.
	stop := context.Cause(ctx)
	w.handlerReturned(a)

	d := decide(job.Attempt, job.MaxAttempts, err, stop, func(attempt int) time.Duration {
		return w.cfg.RetryPolicy.nextRetryDelay(attempt, w.cfg.RetryPolicy.RandFunc)
	})
	attempt := w.failedAttempt(&job, err, start)
	if c := cancelRequest(stop); c != nil && err != nil {
		attempt = cancelledAttempt(attempt, c, err)
	}
	// The task's lines end with its attempt, and go where the attempt's
	// failure goes: into the statement that writes it. A success writes no
	// attempt, and so keeps none (see Logger).
	attempt.Logs = log.endLines(d.act != actComplete && d.act != actDiscard)
	lease := dlq.LeaseOf(w.cfg.ID, job)
	switch d.act {
	case actComplete, actRetry, actDeadLetter:
		w.completer.add(outcome{active: a, lease: lease, d: d, attempt: attempt, log: log, ran: attempt.At.Sub(start)})
	case actHandBack:
		w.handBack(context.WithoutCancel(ctx), &job, attempt, log)
		w.release(lease)
	case actDiscard:
		log.get().Warn("outcome discarded: lease lost to another worker")
		w.release(lease)
	}
}

// runHandler calls the task's handler under its timeout, turning a panic
// into an error, and passes its result to done. When the job's own
// deadline, rather than one inside the handler, ended the context, the
// error says so.
//
// A handler that ignores its cancelled context (a read without a deadline,
// a deadlock) would otherwise hold its job in running for ever, the
// heartbeat renewing the lease. abandonAfter past the cancellation it is
// abandoned: done gets an error (at shutdown the job is then handed back)
// and the slot is freed. Go cannot stop a goroutine, so the handler is
// left to finish whenever it does; should it ever return, nothing it says
// is recorded.
//
// The handler runs on the caller's goroutine, and a timer watches it only
// once its context has ended: one goroutine per job, not two, on the path
// every job takes.
func (w *Worker) runHandler(ctx context.Context, t task, a *activeJob, log *jobLog, done func(error)) (abandoned bool) {
	a.handed = a.job
	job := &a.handed
	// The job's own timeout, else its task's, else the default; never
	// over the operator's cap.
	limit := cmp.Or(job.Timeout(), t.opts.Timeout, w.cfg.DefaultTimeout)
	if w.cfg.MaxTimeout > 0 {
		limit = min(limit, w.cfg.MaxTimeout)
	}
	a.deadline = timeoutError{task: job.Task, after: limit}
	deadline := &a.deadline
	hctx, cancel := context.WithTimeoutCause(ctx, limit, deadline)
	// Exactly one of the handler's return and its abandonment reports.
	var settled atomic.Bool
	settle := func(err error) {
		if err != nil && context.Cause(hctx) == deadline {
			err = &timeoutError{task: job.Task, after: limit, err: err}
		}
		cancel()
		done(err)
	}
	stopWatch := context.AfterFunc(hctx, func() {
		time.AfterFunc(abandonAfter, func() {
			if !settled.CompareAndSwap(false, true) {
				return
			}
			log.get().Error("handler ignored cancellation and was abandoned; its goroutine may still be running",
				"cause", context.Cause(hctx), "waited", abandonAfter)
			settle(&abandonedError{task: job.Task, after: abandonAfter, cause: context.Cause(hctx)})
			// The runner is the handler's now: shutdown does not wait for it.
			w.runners.Done()
		})
	})
	err := callHandler(withLogger(hctx, log), t.handler, job)
	stopWatch()
	if settled.CompareAndSwap(false, true) {
		settle(err)
		return false
	}
	tell(w.signals.dropped)
	return true
}

func callHandler(ctx context.Context, h Handler, job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			// debug.Stack inside the deferred call still holds the frames
			// that panicked, beneath the runtime's panic frames.
			err = &panicError{value: v, stack: fmt.Sprintf("panic: %v\n\n%s", v, debug.Stack())}
		}
	}()
	return h(ctx, job)
}

// failedAttempt describes one attempt for the job's history.
func (w *Worker) failedAttempt(job *dlq.Job, err error, start time.Time) dlq.Attempt {
	now := w.cfg.NowFunc()
	a := dlq.Attempt{
		Attempt: job.Attempt, At: now, Worker: w.cfg.ID, Host: w.host, Version: w.cfg.Version,
		DurationMS: now.Sub(start).Milliseconds(),
	}
	if err != nil {
		// Postgres refuses NUL and invalid UTF-8: an error quoting a binary
		// body would make every write of this outcome fail, leaving the job
		// in running until its lease expired and its real error lost.
		a.Class = dlq.MakeStorable(errorClass(err))
		a.Message = truncate(dlq.MakeStorable(err.Error()), maxMessageBytes)
		a.Traceback = truncate(dlq.MakeStorable(traceback(err)), maxTracebackBytes)
	}
	return a
}

// Bounds on what one attempt stores. Every attempt is kept in the job's
// history and copied into its dead letter, so an error that embeds a whole
// response body must not bloat every row it touches.
const (
	maxMessageBytes   = 8 << 10
	maxTracebackBytes = 32 << 10
)

// truncate cuts s to at most n bytes on a UTF-8 boundary, saying so.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mask.TruncatedMark
}

// interruptedAttempt is the history entry of a job handed back at shutdown.
func (w *Worker) interruptedAttempt(job *dlq.Job, now time.Time, why string) dlq.Attempt {
	return dlq.Attempt{
		Attempt: job.Attempt, At: now, Worker: w.cfg.ID, Host: w.host, Version: w.cfg.Version,
		Class: "Interrupted", Message: "worker shut down before the job finished; " + why,
	}
}

// handBack returns a job interrupted by shutdown to the queue at once, its
// attempt given back. The write is guarded by this worker's lease, so
// ErrConflict means another worker owns the job now.
func (w *Worker) handBack(detached context.Context, job *dlq.Job, a dlq.Attempt, jl *jobLog) {
	log := jl.get()
	ctx, cancel := context.WithTimeout(detached, handBackTimeout)
	defer cancel()
	ran, logs := a.DurationMS, a.Logs
	a = w.interruptedAttempt(job, a.At, fmt.Sprintf("cancelled after the %s shutdown grace", w.cfg.ShutdownGrace))
	a.DurationMS, a.Logs = ran, logs
	handed, err := w.store.HandBack(ctx, dlq.LeaseOf(w.cfg.ID, *job), a)
	switch {
	case err != nil:
		// The job keeps its lease until it expires; then the rescuer runs
		// it again, its attempt spent.
		log.Error("handing the job back failed; it will be redelivered when its lease expires", "err", err)
	case !handed:
		log.Warn("outcome discarded: lease lost to another worker")
	default:
		w.metrics.observe(job.Task, job.Queue, outcomeHandedBack, a.DurationMS)
		log.Info("job handed back to the queue at shutdown")
	}
}
