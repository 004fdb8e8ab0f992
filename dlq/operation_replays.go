package dlq

import (
	"encoding/json"
	"fmt"
)

// Following a bulk replay to its outcome. Its letters are handed to the
// queue first (enqueued); each replay job then settles: it succeeds, or it
// dies again and becomes a new dead letter (whose job_id is the replay
// job). The operation is done only when every replay has settled, or when
// the operator stops following it.

// The follow-through's audit actions.
const (
	ActionCanaryVerdict     = "canary_verdict"      // the canary's replays settled, or one died
	ActionBulkAutoPause     = "bulk_auto_pause"     // the died-again guard paused the releases
	ActionBulkResume        = "bulk_resume"         // the operator resumed after the guard
	ActionBulkStopFollowing = "bulk_stop_following" // the operator ended it before every replay settled
)

// The died-again guard: it judges on the first GuardSample replays to
// settle, and until it has, at most GuardWindow replays are in flight
// (enqueued, not settled), so that a bad replay costs at most that many
// new dead letters before the operation pauses. Operations of more than
// GuardDefaultOver letters get DefaultDiedAgainPercent unless the operator
// says otherwise.
const (
	GuardSample             = 100
	GuardWindow             = 5 * GuardSample
	GuardDefaultOver        = 1000
	DefaultDiedAgainPercent = 20.0
)

// ReplayCounts says where an operation's replay jobs are.
type ReplayCounts struct {
	Waiting   int64 `db:"waiting" json:"waiting"` // available or retrying
	Running   int64 `db:"running" json:"running"`
	Succeeded int64 `db:"succeeded" json:"succeeded"`
	DiedAgain int64 `db:"died_again" json:"died_again"` // dead: a new dead letter
	// Gone counts replays in another system that no longer has their job
	// (its cleaner deleted it before Redrive saw how it ended).
	Gone int64 `db:"gone" json:"gone,omitempty"`
	// Refused counts letters another system would not run again (the job
	// retried since, a unique job holding its key): they are pending
	// again, and none of the other counts.
	Refused int64 `db:"refused" json:"refused,omitempty"`
}

// Settled counts the replays that ran to an end: succeeded, died again,
// or gone from their source.
func (c ReplayCounts) Settled() int64 { return c.Succeeded + c.DiedAgain + c.Gone }

// Total counts every replay of the operation; the refused ran nowhere.
func (c ReplayCounts) Total() int64 { return c.Waiting + c.Running + c.Settled() }

// Scan reads the counts as operations.replays keeps them (JSON).
func (c *ReplayCounts) Scan(src any) error {
	b, ok := src.([]byte)
	if !ok {
		return fmt.Errorf("replay counts: %T is not JSON", src)
	}
	return json.Unmarshal(b, c)
}

// AddTo adds the counts to m, by the names the API gives them.
func (c ReplayCounts) AddTo(m map[string]int64) {
	m["succeeded"], m["died_again"], m["waiting"], m["running"] = c.Succeeded, c.DiedAgain, c.Waiting, c.Running
	if c.Gone > 0 {
		m["gone"] = c.Gone
	}
	if c.Refused > 0 {
		m["refused"] = c.Refused
	}
}

// ReplayOutcome is what became of one letter's replay: its job's state
// and, when it died again, the letter it became.
type ReplayOutcome struct {
	LetterID int64 `db:"letter_id" json:"dead_letter_id"`
	JobID    int64 `db:"job_id" json:"job_id"`
	// JobState is "" when the job is gone (a job is kept while its letter
	// is; this is a letter purged and restored from elsewhere).
	JobState    State  `db:"job_state" json:"job_state"`
	DiedAgainAs *int64 `db:"died_again_as" json:"died_again_as,omitempty"`
	// Source is where the replay ran when the letter came from a system that
	// runs its own jobs (River): JobID is that system's, and JobState is "".
	Source string `db:"source" json:"source,omitempty"`
}
