package views

import (
	"strconv"
	"time"
)

// ThrottleNotice is one open throttle as the banner on every page shows it.
type ThrottleNotice struct {
	ID     int64
	Kind   string // "queue" or "task"
	Name   string
	Limits string // "at most 3 running at once and 2 starts a second"
	By     string
	Since  time.Time
	Reason string
	Until  *time.Time
	// JobsHref lists its jobs.
	JobsHref string
}

// Target names what the throttle slows: "task payments.charge".
func (t ThrottleNotice) Target() string { return t.Kind + " " + t.Name }

func (t ThrottleNotice) idString() string { return strconv.FormatInt(t.ID, 10) }

// ThrottleRow is a throttle on the pauses page, with how its work stands.
type ThrottleRow struct {
	ThrottleNotice
	// Running and Waiting count its jobs running now and due now.
	Running, Waiting int64
	// ChangedBy names who last changed its limits, if anyone did.
	ChangedBy string
	// Ended says how an ended throttle ended ("lifted by bob",
	// "expired"); empty while it holds.
	Ended   string
	EndedAt *time.Time
}

// ThrottleForm is the throttle form: what to slow, to which limits, why
// and for how long. With ID set it changes that open throttle.
type ThrottleForm struct {
	ID         int64
	Kind, Name string
	// MaxRunning and MaxPerSecond are the limits as typed; empty: none.
	MaxRunning, MaxPerSecond string
	Reason                   string
	For, Until               string
	Durations                []Option
	Problems                 map[string]string
	Key                      string
	CSRFToken                string
	// Running and Waiting count the queue's or task's jobs running and
	// waiting now (-1: unknown).
	Running, Waiting int64
	// Open is the throttle already on it, when setting a new one.
	Open *ThrottleNotice
	Now  time.Time
}

// action is where the form posts.
func (f ThrottleForm) action() string {
	if f.ID != 0 {
		return "/throttles/" + strconv.FormatInt(f.ID, 10)
	}
	return "/throttles"
}
