package dlq

// ClaimQuery exposes the claim of limit jobs by "plan-test" with a 30 s
// lease, and its parameters, to the external tests that check its plan.
func ClaimQuery(queues []string, after map[string]Position, limit int) (string, []any) {
	return claimArgs("plan-test", queues, after, limit, 30_000)
}

// ListPageSQL exposes the list query and its arguments to the external
// tests that check its plan.
func ListPageSQL(f Filter, limit int) (string, []any) { return listPageSQL(f, limit) }

// DeleteSucceededSQL and SucceededBoundSQL expose the cleaner's delete
// ($1 the cutoff, $2 the batch, $3 the bound) and its bound ($1) to the
// external tests that check their plans.
const (
	DeleteSucceededSQL = deleteSucceededSQL
	SucceededBoundSQL  = succeededBoundSQL
)

// JobsQuery exposes the job list's statement and its arguments to the
// external tests that check its plan.
func JobsQuery(f JobFilter) (string, []any) {
	query, args, _ := jobsQuery(f)
	return query, args
}
