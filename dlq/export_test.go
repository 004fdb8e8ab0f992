package dlq

// ClaimSQL exposes the claim query to the external tests that check its plan.
const ClaimSQL = claimSQL

// ListPageSQL exposes the list query and its arguments to the external
// tests that check its plan.
func ListPageSQL(f Filter, limit int) (string, []any) { return listPageSQL(f, limit) }
