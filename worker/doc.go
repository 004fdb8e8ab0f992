// Package worker runs jobs from Redrive's Postgres queue: it claims them,
// runs their handlers, and records each outcome as success, a scheduled
// retry or a dead letter.
//
// # Using it
//
//	reg := worker.NewRegistry()
//	reg.Register("email.send", sendEmail, worker.TaskOptions{Timeout: 30 * time.Second})
//	w, err := worker.New(store, worker.Config{Registry: reg, Queues: []string{"default", "emails"}})
//	...
//	err = w.Run(ctx) // returns after ctx is cancelled and shutdown is done
//
// A Handler returns nil for success, worker.Permanent(err) for a failure that
// will repeat however often the job is retried (the job is dead-lettered at
// once), and any other error for a transient failure (the job is retried
// with exponential backoff and full jitter, then dead-lettered as exhausted
// when its max_attempts are spent). A panic is recovered and treated as a
// transient failure whose traceback is the panic's stack.
//
// # Delivery contract: at least once
//
// A job is acknowledged only after its handler returns. Claiming takes a
// lease that a heartbeat renews; a worker that dies (SIGKILL, OOM, lost
// network) stops renewing, and once the lease expires the lease rescuer,
// which every worker runs, puts the job back in the queue. Attempts are
// counted when a job is claimed, not when it fails, so a job that kills
// every worker that runs it is dead-lettered with reason lease_expired
// after max_attempts instead of crashing workers forever.
//
// The consequence is that a handler may run more than once for one job: after
// a crash, after a lost lease, or when its success was not recorded. Handlers
// must be idempotent. For effects in this database, ProcessOnce makes an
// event's effect happen exactly once by committing it in one transaction
// with a record of the event's id.
//
// Outcomes are written in batches by the worker's completer (see
// completer.go); a job keeps its lease, renewed by the heartbeat, until
// its outcome is written, and a write that fails for its connection is
// retried until the database takes it. So a database that goes away
// delays the acknowledgement rather than redelivering the job, even for
// longer than the lease: the write is guarded by the claim (worker and
// attempt), not by the lease's expiry, and a job the rescuer requeued
// meanwhile is taken back if nobody has claimed it since. Only when
// another claim has taken it, or the rescuer dead-lettered it on its last
// attempt, is the outcome lost; the attempt still counts, and the job's
// history says that it ran and its outcome was lost (dlq.OutcomeLost). A
// job whose handler ran is never handed back as unrun: the hand-back of
// claims whose reply was lost skips every claim the worker knows it ran.
//
// Every job ends succeeded or dead-lettered; nothing is dropped. A job whose
// task has no handler on this worker is dead-lettered at once (reason
// permanent, class UnknownTask) rather than left waiting, so every worker
// that serves a queue should register the same tasks.
//
// # Periodic jobs
//
// Registry.Schedule adds a schedule: a cron expression in a timezone, or an
// interval, enqueuing a task. Every worker that registers it runs it in a
// loop of its own (scheduler.go), apart from the claim path; an occurrence
// is enqueued once across all of them by one statement whose guard only
// the first gets through, under the idempotency key
// periodic:<name>:<occurrence>. Occurrences missed while no worker ran are
// skipped but for one, enqueued late by the first worker to start. A job
// enqueued by a schedule is a job like any other: at least once.
//
// # Shutdown
//
// When Run's context is cancelled the worker stops claiming at once, lets
// in-flight jobs run for up to Config.ShutdownGrace, then cancels their
// contexts. Each job that did not finish is handed straight back to the
// queue (its attempt given back: a shutdown is not the job's fault), so
// another worker can take it immediately instead of after the lease expires.
// Leases stay renewed throughout, so no other worker takes a job that is
// still finishing. A handler that ignores its context even after that is
// abandoned: its job is handed back anyway and its late result, if any, is
// discarded by the lease guard in the store. Finally the worker removes its
// row from the workers table and Run returns; every goroutine it started
// has stopped, except the abandoned handlers.
package worker
