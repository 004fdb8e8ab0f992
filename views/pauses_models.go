package views

import (
	"strconv"
	"time"
)

// PauseNotice is one open pause as the banner on every page shows it.
type PauseNotice struct {
	ID       int64
	Kind     string // "queue" or "task"
	Name     string
	By       string
	Since    time.Time
	Reason   string
	Until    *time.Time
	JobsHref string // the held jobs
}

// Target names what the pause holds: "task payments.charge".
func (p PauseNotice) Target() string { return p.Kind + " " + p.Name }

func (p PauseNotice) idString() string { return strconv.FormatInt(p.ID, 10) }

// PauseRow is a pause on the pauses page and the overview, with the jobs
// it holds back.
type PauseRow struct {
	PauseNotice
	Waiting   int64
	Scheduled int64
	// Ended says how an ended pause ended ("resumed by bob", "expired");
	// empty while it holds.
	Ended   string
	EndedAt *time.Time
}

// PauseForm is the pause form: what to pause, why and for how long.
type PauseForm struct {
	Kind, Name string
	Reason     string
	// For is the chosen duration ("30m"); Until a time of day ("14:30",
	// UTC) or a full timestamp.
	For, Until string
	Durations  []Option
	Problems   map[string]string
	Key        string
	CSRFToken  string
	// Waiting is how many jobs the queue or task has waiting now (-1:
	// unknown); Open is the pause already holding it, if any.
	Waiting int64
	Open    *PauseNotice
	// Now is the time the form was shown, to help with "until 14:30".
	Now time.Time
}

// PausesPage lists the open pauses, the form to pause something, and the
// recent ended pauses.
type PausesPage struct {
	Open   []PauseRow
	Recent []PauseRow
	Form   PauseForm
	// Throttles are the open throttles, RecentThrottles the ended ones,
	// ThrottleForm the form to throttle something.
	Throttles       []ThrottleRow
	RecentThrottles []ThrottleRow
	ThrottleForm    ThrottleForm
	CanAct          bool
	CSRFToken       string
}

// PauseLinks says what a list page needs for its pause links: whether the
// viewer may pause, and which queues and tasks are paused already.
type PauseLinks struct {
	CanAct bool
	Open   []PauseNotice
	// Throttled are the open throttles, for the throttle links.
	Throttled []ThrottleNotice
}

// ThrottleOf returns the open throttle of kind and name, or nil.
func (l *PauseLinks) ThrottleOf(kind, name string) *ThrottleNotice {
	if l == nil {
		return nil
	}
	for i := range l.Throttled {
		if l.Throttled[i].Kind == kind && l.Throttled[i].Name == name {
			return &l.Throttled[i]
		}
	}
	return nil
}

// Of returns the open pause of kind and name, or nil.
func (l *PauseLinks) Of(kind, name string) *PauseNotice {
	if l == nil {
		return nil
	}
	for i := range l.Open {
		if l.Open[i].Kind == kind && l.Open[i].Name == name {
			return &l.Open[i]
		}
	}
	return nil
}
