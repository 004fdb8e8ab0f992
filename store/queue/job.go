package queue

// JobColumns is the explicit column list every job query selects.
const JobColumns = `id, queue, task, args, kwargs, idempotency_key, state, attempt,
	max_attempts, run_at, lease_owner, lease_expires_at, last_error, errors,
	created_at, attempted_at, finished_at, replay_of, timeout_ms`
