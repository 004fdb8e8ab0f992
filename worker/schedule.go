package worker

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/redrive/redrive/dlq"
)

// Schedule enqueues a task periodically: at the times of a cron expression
// in a timezone, or every interval. Register it with Registry.Schedule on
// every worker that should keep it running; each occurrence is enqueued
// once however many of them run (see the package doc).
type Schedule struct {
	// Cron is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), or six with seconds first, or a descriptor such
	// as @daily or @hourly. Read in Timezone.
	Cron string
	// Every is an interval of real time instead of Cron: at least a
	// second, in whole milliseconds. Its occurrences fall on multiples of
	// it since the Unix epoch (every 15m: :00, :15, :30, :45 UTC), so all
	// workers agree on them.
	Every time.Duration
	// Timezone is the IANA name Cron is read in ("Europe/Berlin").
	// Default UTC. Not for Every, which counts real time.
	Timezone string
	// Task is the task to enqueue; it must be registered on the same
	// Registry.
	Task string
	// Queue to enqueue on. Default "default".
	Queue string
	// Args (a JSON array) and Kwargs (a JSON object) of each job. Default
	// empty.
	Args   []byte
	Kwargs []byte
	// MaxAttempts of each job. Default 5.
	MaxAttempts int
}

// timing computes a schedule's occurrences.
type timing interface {
	// next is the first occurrence strictly after t, or the zero time if
	// there is none.
	next(t time.Time) time.Time
}

// registeredSchedule is a validated schedule: its definition as stored
// and its timing.
type registeredSchedule struct {
	def    dlq.ScheduleDefinition
	timing timing
}

// cronParser reads five fields, an optional sixth for seconds, and the
// descriptors (@daily). A timezone prefix (CRON_TZ=) is refused before
// parsing: Timezone says it, once.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule adds a schedule named name. Like Register it panics on a
// programming error: an invalid name or expression, an unknown timezone,
// both or neither of Cron and Every, bad arguments, a name used twice. The
// task must be registered on the registry before New is called.
func (r *Registry) Schedule(name string, s Schedule) {
	rs, err := newRegisteredSchedule(name, s)
	if err != nil {
		panic(fmt.Sprintf("worker: schedule %q: %s", name, err))
	}
	if _, dup := r.schedules[name]; dup {
		panic(fmt.Sprintf("worker: schedule %q registered twice", name))
	}
	r.schedules[name] = rs
}

// newRegisteredSchedule validates s and builds its timing.
func newRegisteredSchedule(name string, s Schedule) (registeredSchedule, error) {
	if msg := dlq.TaskNameProblem(name); msg != "" {
		return registeredSchedule{}, fmt.Errorf("invalid name: %s", msg)
	}
	t, tz, err := parseTiming(s)
	if err != nil {
		return registeredSchedule{}, err
	}
	if t.next(time.Now()).IsZero() {
		return registeredSchedule{}, fmt.Errorf("cron %q never comes due", s.Cron)
	}
	p, err := dlq.EnqueueParams{Task: s.Task, Queue: s.Queue, Args: s.Args, Kwargs: s.Kwargs, MaxAttempts: s.MaxAttempts}.Normalise()
	if err != nil {
		return registeredSchedule{}, err
	}
	def := dlq.ScheduleDefinition{Name: name, Cron: strings.TrimSpace(s.Cron), Every: s.Every, Timezone: tz,
		Task: p.Task, Queue: p.Queue, Args: p.Args, Kwargs: p.Kwargs, MaxAttempts: p.MaxAttempts}
	return registeredSchedule{def: def, timing: t}, nil
}

// parseTiming reads Cron in Timezone, or Every, and returns the timezone's
// name as stored.
func parseTiming(s Schedule) (timing, string, error) {
	expr := strings.TrimSpace(s.Cron)
	switch {
	case expr != "" && s.Every != 0:
		return nil, "", fmt.Errorf("give Cron or Every, not both")
	case s.Every != 0:
		if s.Timezone != "" {
			return nil, "", fmt.Errorf("timezone %q: an interval (Every) counts real time; a timezone is for Cron", s.Timezone)
		}
		if s.Every < time.Second || s.Every%time.Millisecond != 0 {
			return nil, "", fmt.Errorf("every %s: must be at least 1s, in whole milliseconds", s.Every)
		}
		return interval{every: s.Every}, "UTC", nil
	case expr == "":
		return nil, "", fmt.Errorf("give Cron (\"0 3 * * *\") or Every (time.Hour)")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "@every") {
		return nil, "", fmt.Errorf("cron %q: give the timezone in Timezone and an interval in Every, not in the expression", expr)
	}
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, "", fmt.Errorf("timezone %q: not an IANA timezone name such as Europe/Berlin", tz)
	}
	parsed, err := cronParser.Parse(expr)
	if err != nil {
		return nil, "", fmt.Errorf("cron %q: %w", expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, "", fmt.Errorf("cron %q: not a cron expression", expr)
	}
	return newCronTiming(spec, loc), tz, nil
}

// interval falls on multiples of every since the Unix epoch.
type interval struct{ every time.Duration }

func (i interval) next(t time.Time) time.Time {
	ns, every := t.UnixNano(), i.every.Nanoseconds()
	return time.Unix(0, ns-ns%every+every).UTC()
}

// cronTiming reads a cron expression in a timezone, right across daylight
// saving changes, as cron daemons do:
//
//   - An expression whose hour field is * (every 15 minutes, hourly)
//     counts real time: it runs in both passes of the hour that repeats
//     when clocks go back, and carries on after the hour that clocks skip.
//   - One with hours (0 3 * * *, 30 2 * * 1-5) names wall-clock times: each
//     runs once, in the first pass of a repeated hour, and a time the
//     clocks skip runs as late as the skip is long (02:30 on the day 02:00
//     becomes 03:00 runs at 03:30).
type cronTiming struct {
	// real is the expression in loc, for expressions with every hour.
	real *cron.SpecSchedule
	// wall is the expression in UTC, used on wall-clock times written as
	// UTC instants, for expressions with hours.
	wall     *cron.SpecSchedule
	loc      *time.Location
	everyHrs bool
}

// allHours are the hour field's bits when it is * (or 0-23).
const allHours = 1<<24 - 1

func newCronTiming(spec *cron.SpecSchedule, loc *time.Location) cronTiming {
	real, wall := *spec, *spec
	real.Location, wall.Location = loc, time.UTC
	return cronTiming{real: &real, wall: &wall, loc: loc, everyHrs: spec.Hour&allHours == allHours}
}

func (c cronTiming) next(t time.Time) time.Time {
	if c.everyHrs {
		return c.real.Next(t).UTC()
	}
	w := wallClock(t.In(c.loc))
	// A wall-clock time read back as an instant may lie before t: the
	// second pass of a repeated hour reads its times as the first pass's.
	// Those were run then, so they are passed over here. A day has at most
	// a few such times before one lies after t.
	for range 100 {
		w = c.wall.Next(w)
		if w.IsZero() {
			return w
		}
		if at := instant(w, c.loc); at.After(t) {
			return at.UTC()
		}
	}
	return time.Time{}
}

// wallClock is t's wall-clock reading in its location, as a UTC instant.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the moment the clocks of loc read the wall-clock time w
// (written as a UTC instant): its first, when clocks going back read it
// twice; and, when clocks going forward skip it, the moment as late after
// the skip as w is into it.
func instant(w time.Time, loc *time.Location) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	if !wallClock(at).Equal(w) {
		// Skipped: read w with the offset in force before the skip.
		_, before := w.Add(-24 * time.Hour).In(loc).Zone()
		return w.Add(-time.Duration(before) * time.Second)
	}
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if earlier := at.Add(-d); wallClock(earlier.In(loc)).Equal(w) {
			return earlier
		}
	}
	return at
}

// followingRun is the occurrence to wait for after at: the next one,
// unless that too has passed by now (no worker ran for a while), in which
// case the first after now. So a fleet that was away makes up one
// occurrence, not every one it missed.
func followingRun(t timing, at, now time.Time) time.Time {
	n := t.next(at)
	if !n.After(now) {
		n = t.next(now)
	}
	return n
}
