package views

import "time"

// Retention is what the overview and the letter list say of the retention
// of settled letters: the next scheduled purge, and the purges held
// because their group is still growing.
type Retention struct {
	// Scheduled: the console purges by itself (REDRIVE_RETAIN_LETTERS).
	Scheduled bool
	// Retain is the retention in words ("30 d"); At the next purge and In
	// how long until it ("23 min").
	Retain, In string
	At         time.Time
	// SettledBefore is the next purge's cutoff; Removes how many letters
	// it deletes ("1,204", "over 100,000"); NoneToRemove when none.
	SettledBefore time.Time
	Removes       string
	NoneToRemove  bool
	Holds         []RetentionHold
	// Done says what an operator's confirmation just purged.
	Done string
}

// RetentionHold is a purge held for a growing group.
type RetentionHold struct {
	Group, Task, GroupHref, ConfirmURL string
	Letters                            int64
	HeldAt, SettledBefore              time.Time
}
