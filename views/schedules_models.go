package views

import "time"

// SchedulesPage lists the periodic jobs workers register.
type SchedulesPage struct {
	Rows      []ScheduleRow
	CanAct    bool
	CSRFToken string
	// Key seeds the one-time keys of the rows' forms.
	Key string
}

// ScheduleRow is one schedule: when it runs, what it enqueues, its next
// run and its latest runs.
type ScheduleRow struct {
	Name, When, Task, Queue string
	TaskHref                string
	Enabled                 bool
	NextRunAt               time.Time
	// Overdue: enabled, and the next run is long past: no worker that
	// registers the schedule is running.
	Overdue    bool
	LastSeenAt time.Time
	// The last disable or enable, if any.
	ChangedBy, ChangeReason string
	ChangedAt               *time.Time
	// Runs are the latest runs, newest first; DeadLetters those of them
	// whose job died.
	Runs, DeadLetters []ScheduleRunView
	// Form is what was typed in this row's form when it was refused.
	Form ScheduleRowForm
}

// LastRun is the newest run, if any.
func (r ScheduleRow) LastRun() *ScheduleRunView {
	if len(r.Runs) == 0 {
		return nil
	}
	return &r.Runs[0]
}

// State is "enabled" or "disabled".
func (r ScheduleRow) State() string {
	if r.Enabled {
		return "enabled"
	}
	return "disabled"
}

// Action is what the row's form does: "disable" or "enable".
func (r ScheduleRow) Action() string {
	if r.Enabled {
		return "disable"
	}
	return "enable"
}

// ScheduleRunView is one occurrence a schedule enqueued.
type ScheduleRunView struct {
	At      time.Time
	Outcome string // a job state
	// JobHref is the job's page; empty when the cleaner deleted it.
	JobHref    string
	LetterHref string
	LetterID   int64
}

// ScheduleRowForm is a row's disable or enable form as typed.
type ScheduleRowForm struct {
	Reason, Problem string
}
