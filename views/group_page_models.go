package views

import "time"

// GroupPageView is one error group's page.
type GroupPageView struct {
	// Pause offers to pause the group's task (nil: no pause link).
	Pause       *PauseLinks
	Fingerprint string
	Task        string
	ErrorClass  string
	// Message is the group's sample message, masked.
	Message    string
	FirstSeen  time.Time
	LastSeen   time.Time
	Pending    string
	HasPending bool
	Total      string
	LastHour   string
	New        bool
	Hourly     BarChart
	Daily      BarChart
	// SampleID is the newest letter, whose (masked) traceback is shown.
	SampleID   int64
	SampleHref string
	Traceback  string
	Letters    DeadLetterResults
	CanAct     bool
	// Links: the group's pending letters, all its letters, the other
	// groups of its task, and the bulk confirmations for the group.
	PendingHref string
	AllHref     string
	TaskHref    string
	ReplayHref  string
	DiscardHref string
}
