package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/redrive/redrive/dlq"
)

// Cancelling a running job on an operator's request (dlq.JobCancel). The
// console records the request on the job's row and announces it with
// NOTIFY on dlq.CancelNotifyChannel; the worker holding the attempt
// cancels the handler's context with a *cancelRequestedError as its cause,
// and the attempt's outcome is then written the usual way, guarded by the
// lease: dead-lettered with reason cancelled, or retried when the operator
// asked for that and attempts are left. A handler that ignores the
// cancellation is abandoned after abandonAfter, as for a timeout. A worker
// without LISTEN (or whose connection was down) finds the request at its
// next heartbeat, which reads the requests for the attempts it holds.

// cancelRequestedError is the cause a job's context is cancelled with when
// an operator asked for it.
type cancelRequestedError struct {
	req dlq.CancelRequest
}

func (e *cancelRequestedError) Error() string {
	msg := "cancelled by " + e.req.By
	if e.req.Reason != "" {
		msg += ": " + e.req.Reason
	}
	return msg
}

// cancelRequest returns the operator's request that stopped a job, if any.
func cancelRequest(stop error) *cancelRequestedError {
	c, _ := errors.AsType[*cancelRequestedError](stop)
	return c
}

// cancelledAttempt rewrites a cancelled attempt's history entry to say who
// cancelled it and why; what the handler returned is kept after it.
func cancelledAttempt(a dlq.Attempt, c *cancelRequestedError, err error) dlq.Attempt {
	a.Class = "Cancelled"
	msg := c.Error()
	if err != nil && !errors.Is(err, context.Canceled) {
		msg += fmt.Sprintf("; the handler returned: %s", a.Message)
	}
	a.Message = truncate(dlq.MakeStorable(msg), maxMessageBytes)
	return a
}

// cancelNotified handles one cancel notification; requests for jobs this
// worker does not hold are another worker's.
func (w *Worker) cancelNotified(payload string) {
	req, err := dlq.ParseCancelRequest(payload)
	if err != nil {
		w.log.Warn("unreadable cancel notification", "err", err)
		return
	}
	if req.Worker == w.cfg.ID {
		w.applyCancel(req)
	}
}

// applyCancel cancels the handler of the attempt req names, if this worker
// is running it. Cancelling twice (notification and heartbeat) is harmless:
// the first cause stays.
func (w *Worker) applyCancel(req dlq.CancelRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.active[dlq.Lease{Worker: w.cfg.ID, JobID: req.JobID, Attempt: req.Attempt}]
	if a == nil || a.finished.Load() {
		return
	}
	w.log.Warn("cancelling job on an operator's request", "job_id", req.JobID, "task", a.job.Task,
		"attempt", req.Attempt, "by", req.By, "reason", req.Reason, "retry", req.Retry)
	a.cancel(&cancelRequestedError{req: req})
}

// checkCancels applies the cancel requests recorded for the attempts this
// worker holds: the path for a worker that did not hear the NOTIFY.
func (w *Worker) checkCancels(ctx context.Context, held []dlq.Lease) {
	reqs, err := w.store.CancelRequests(ctx, w.cfg.ID, held)
	if err != nil {
		w.noteFailure(err)
		w.log.Warn("read cancel requests failed", "err", err)
		return
	}
	for _, r := range reqs {
		w.applyCancel(r)
	}
}
