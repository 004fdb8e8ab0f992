package dlq

import (
	"github.com/lib/pq"
)

// The search text is written by triggers in whichever process dead-letters
// a job, but the mask rules are the console's configuration: the console
// writes them to mask_policy at start (ApplyMaskPolicy), the triggers read
// them there, and RebuildSearch brings older search rows up to date. See
// 00102_search.sql.

// MaskPolicyState is the policy the database holds.
type MaskPolicyState struct {
	Version  int64          `db:"version"`
	Keys     pq.StringArray `db:"keys"`
	Patterns pq.StringArray `db:"written"`
	// Stale counts the search rows built under another version: search
	// skips them until RebuildSearch has rebuilt them.
	Stale int64 `db:"stale"`
}

// DefaultRebuildBatch is how many search rows one rebuild statement
// rewrites: a fraction of a second of work, so the row locks it holds
// never keep a purge waiting long.
const DefaultRebuildBatch = 2000
