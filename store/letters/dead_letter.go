package letters

// DeadLetterColumns is the explicit column list every dead-letter query selects.
const DeadLetterColumns = `id, job_id, queue, task, args, kwargs, idempotency_key,
	error_class, error_message, traceback, attempts, max_attempts, history, reason,
	fingerprint, worker_version, enqueued_at, failed_at, replay_of, replayed_at,
	replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason, status`
