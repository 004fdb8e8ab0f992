package worker

import (
	"context"
	"slices"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
)

// notifyChannel is where the jobs table's insert trigger announces new work;
// the payload is the queue's name.
const notifyChannel = "redrive_jobs"

// Listener tuning. The reconnect bounds keep a restarting database from
// being hammered while still reconnecting within seconds. lib/pq notices a
// silently dead connection only when it next uses it, so an idle listener
// pings it; 90 s is the interval lib/pq's documentation suggests.
const (
	listenMinReconnect = 100 * time.Millisecond
	listenMaxReconnect = 5 * time.Second
	listenPingAfter    = 90 * time.Second
	listenStopTimeout  = 5 * time.Second
)

// listen wakes the claim loop whenever a job is enqueued on one of this
// worker's queues, until ctx is cancelled. Polling stays on as the
// fallback: LISTEN loses notifications while its connection is down, and
// retries coming due send none.
func (w *Worker) listen(ctx context.Context) {
	l := pq.NewListener(w.cfg.ListenDSN, listenMinReconnect, listenMaxReconnect, func(ev pq.ListenerEventType, err error) {
		if err != nil {
			w.log.Warn("job notifications", "event", ev.String(), "err", err)
		}
	})
	// Listen blocks until the first connection is up, which may be never:
	// run it aside so shutdown is not held hostage by an unreachable server.
	listening := make(chan error, 1)
	go func() {
		// Operators' cancels of running jobs (cancel.go) first: once the
		// jobs channel is listened to, both are.
		err := l.Listen(dlq.CancelNotifyChannel)
		if err == nil {
			err = l.Listen(notifyChannel)
		}
		listening <- err
	}()
	// A closure, so closeListener sees listening as it is at return: nil
	// once Listen has answered.
	defer func() { w.closeListener(l, listening) }()

	idle := time.NewTimer(listenPingAfter)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-listening:
			if err != nil {
				w.log.Warn("listen for job notifications failed; polling only", "err", err)
			} else {
				// A job enqueued after the first claim but before LISTEN took
				// hold sent its notification to nobody: look once now, or it
				// waits for the next poll.
				signal(w.wake)
			}
			listening = nil
		case n, ok := <-l.Notify:
			if !ok {
				return
			}
			// nil means the connection was re-established and notifications
			// may have been lost meanwhile: look for work anyway (a lost
			// cancel is found by the next heartbeat).
			if n != nil && n.Channel == dlq.CancelNotifyChannel {
				w.cancelNotified(n.Extra)
			} else if n == nil || slices.Contains(w.cfg.Queues, n.Extra) {
				signal(w.wake)
			}
			idle.Reset(listenPingAfter)
		case <-idle.C:
			if err := l.Ping(); err != nil {
				w.log.Warn("job notification connection unhealthy", "err", err)
			}
			idle.Reset(listenPingAfter)
		}
	}
}

// closeListener closes l and waits for its goroutines: Close makes a pending
// Listen return, and lib/pq closes Notify once its connection loop exits,
// which needs Notify drained.
func (w *Worker) closeListener(l *pq.Listener, listening <-chan error) {
	_ = l.Close()
	timeout := time.NewTimer(listenStopTimeout)
	defer timeout.Stop()
	notify := l.Notify
	for notify != nil || listening != nil {
		select {
		case _, ok := <-notify:
			if !ok {
				notify = nil
			}
		case <-listening:
			listening = nil
		case <-timeout.C:
			w.log.Warn("job notification listener did not stop in time")
			return
		}
	}
}
