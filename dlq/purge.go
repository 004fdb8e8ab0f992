package dlq

import (
	"time"
)

// PurgeParams asks for old, settled dead letters to be deleted.
type PurgeParams struct {
	// OlderThan: letters replayed or discarded before Now - OlderThan go.
	// Pending letters are never purged.
	OlderThan time.Duration
	Actor     Actor
	Now       time.Time
	// BatchSize bounds each delete's transaction; default 5000.
	BatchSize int
}

// The audit actions of a purge held for a growing group, and of an
// operator confirming it.
const (
	ActionPurgeHeld    = "purge_held"
	ActionPurgeConfirm = "purge_confirm"
)

// PurgeGrowingWindow is how recent a group's newest letter must be for the
// group to count as still growing: a retention purge holds the settled
// letters of a group that had a new letter within this before the purge,
// and asks an operator to confirm instead.
const PurgeGrowingWindow = time.Hour

// PurgeHold is a purge held for a growing group: Letters settled letters
// of the group Fingerprint (of Task), settled before SettledBefore, kept
// since HeldAt until an operator confirms or the group stops growing.
type PurgeHold struct {
	Fingerprint   string    `db:"fingerprint" json:"fingerprint"`
	Task          string    `db:"task" json:"task"`
	Letters       int64     `db:"letters" json:"letters"`
	SettledBefore time.Time `db:"settled_before" json:"settled_before"`
	HeldAt        time.Time `db:"held_at" json:"held_at"`
}

// PurgeForecast is what the next retention purge will do.
type PurgeForecast struct {
	// At is when it runs; SettledBefore the cutoff it will use.
	At, SettledBefore time.Time
	// Removes counts the letters it will delete, up to MaxForecast
	// (Capped when there are more).
	Removes int64
	Capped  bool
	// Holds are the purges held now, one per growing group.
	Holds []PurgeHold
}

// MaxForecast bounds the count of a forecast: the overview reads at most
// this many index entries for it.
const MaxForecast = 100_000

// NextPurge is when the console's scheduled retention purge runs next
// after now: at the top of every hour (UTC), so the overview can say when
// and anyone can tell from the audit trail whether it ran.
func NextPurge(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(time.Hour)
}
