package queue

import "github.com/redrive/redrive/dlq"

// The statements below are exported for the store's tests that read their
// plans (EXPLAIN): a change that loses an index fails a test, not a
// production database.

// ClaimQuery is the plain claim of limit jobs by "plan-test" with a 30 s
// lease, holding the grants of rooms, and its parameters.
func ClaimQuery(queues []string, after map[string]dlq.Position, limit int, rooms ...Room) (string, []any) {
	return claimArgs("plan-test", queues, after, limit, 30_000, rooms, false)
}

// ThrottledClaimQuery is ClaimQuery's claim with rooms below the limit.
func ThrottledClaimQuery(queues []string, after map[string]dlq.Position, limit int, rooms ...Room) (string, []any) {
	return claimArgs("plan-test", queues, after, limit, 30_000, rooms, true)
}

// DeleteSucceededSQL and SucceededBoundSQL are the cleaner's delete ($1
// the cutoff, $2 the batch, $3 the bound) and its bound ($1).
const (
	DeleteSucceededSQL = deleteSucceededSQL
	SucceededBoundSQL  = succeededBoundSQL
)

// JobsQuery is the job list's statement and its arguments.
func JobsQuery(f dlq.JobFilter) (string, []any) {
	query, args, _ := jobsQuery(f)
	return query, args
}
