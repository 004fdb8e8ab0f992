package views

import "net/url"

// TaskHref is the page of a task, wherever a task name is shown.
func TaskHref(task string) string { return "/tasks/" + url.PathEscape(task) }

// TimingCell is one task over one window: counts and percentiles, written
// for people ("12 ms"; "–" when nothing ran).
type TimingCell struct {
	// Window is "1h", "1d" or "14d"; Label says it in words.
	Window, Label        string
	Runs, Failures, Dead int64
	// FailureRate is failures over runs, "2.5 %" ("–" when nothing ran).
	FailureRate string
	// WaitP50 … RunP99 are the percentiles of queue wait and run time.
	WaitP50, WaitP95, WaitP99 string
	RunP50, RunP95, RunP99    string
}

// TaskRow is one task of the /tasks index.
type TaskRow struct {
	Name, Href string
	// Hour and Fortnight are its last hour and its last 14 days.
	Hour, Fortnight TimingCell
}

// TasksPage lists every task that ran in the last 14 days.
type TasksPage struct {
	Rows []TaskRow
	// FlushEvery says how late the numbers may be ("10 s").
	FlushEvery string
}

// TaskPage is one task's runs and timings over the last hour, day and
// fortnight.
type TaskPage struct {
	Name string
	// Windows are its timings, shortest window first.
	Windows []TimingCell
	// Ran: any window counted a run.
	Ran bool
	// LettersHref and JobsHref list its pending letters and its jobs.
	LettersHref, JobsHref string
	FlushEvery            string
}
