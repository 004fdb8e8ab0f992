package dlq

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Periodic jobs. Workers register schedules (a cron expression in a
// timezone, or an interval) as they start; each occurrence of a schedule is
// enqueued once across all the workers that register it, as a job whose
// idempotency key is ScheduleKey(name, occurrence), by the first worker to
// move the schedule's next run past it (store/queue/schedules.go). An
// operator can disable a schedule in the console, with a reason, audited:
// its occurrences then enqueue nothing until it is enabled again.

// Audit actions of schedules.
const (
	ActionScheduleDisable = "schedule_disable"
	ActionScheduleEnable  = "schedule_enable"
)

// MaxScheduleReason bounds the reason given to disable or enable a schedule.
const MaxScheduleReason = 1000

// ScheduleRunsShown is how many of a schedule's latest runs its row lists.
const ScheduleRunsShown = 10

// ScheduleKey is the idempotency key of a schedule's occurrence: the same
// for every worker that computes it, so a second insert does nothing.
func ScheduleKey(name string, occurrence time.Time) string {
	return "periodic:" + name + ":" + occurrence.UTC().Format(time.RFC3339)
}

// ScheduleDefinition is a schedule as a worker registers it: what to
// enqueue and when. Exactly one of Cron and Every is set.
type ScheduleDefinition struct {
	Name        string
	Cron        string
	Every       time.Duration
	Timezone    string
	Task        string
	Queue       string
	Args        json.RawMessage
	Kwargs      json.RawMessage
	MaxAttempts int
	// NextRunAt is the first occurrence after now by this definition: the
	// schedule's next run when it is new or its timing changed.
	NextRunAt time.Time
}

// Schedule is a registered schedule as the console shows it.
type Schedule struct {
	Name         string          `db:"name" json:"name"`
	Cron         *string         `db:"cron" json:"cron"`
	EveryMS      *int64          `db:"every_ms" json:"every_ms"`
	Timezone     string          `db:"timezone" json:"timezone"`
	Task         string          `db:"task" json:"task"`
	Queue        string          `db:"queue" json:"queue"`
	Args         json.RawMessage `db:"args" json:"args"`
	Kwargs       json.RawMessage `db:"kwargs" json:"kwargs"`
	MaxAttempts  int             `db:"max_attempts" json:"max_attempts"`
	NextRunAt    time.Time       `db:"next_run_at" json:"next_run_at"`
	Enabled      bool            `db:"enabled" json:"enabled"`
	ChangedBy    *string         `db:"changed_by" json:"changed_by"`
	ChangedAt    *time.Time      `db:"changed_at" json:"changed_at"`
	ChangeReason *string         `db:"change_reason" json:"change_reason"`
	RegisteredAt time.Time       `db:"registered_at" json:"registered_at"`
	LastSeenAt   time.Time       `db:"last_seen_at" json:"last_seen_at"`
	// Runs are its latest runs, newest first (ScheduleRunsShown).
	Runs []ScheduleRun `db:"-" json:"runs"`
}

// When says when the schedule runs: "cron 0 3 * * * (Europe/Berlin)" or
// "every 5m0s".
func (s Schedule) When() string {
	if s.Cron != nil {
		return fmt.Sprintf("cron %s (%s)", *s.Cron, s.Timezone)
	}
	if s.EveryMS != nil {
		return "every " + (time.Duration(*s.EveryMS) * time.Millisecond).String()
	}
	return ""
}

// ScheduleRun is one occurrence a schedule enqueued, and what became of
// its job.
type ScheduleRun struct {
	Schedule     string    `db:"schedule" json:"-"`
	OccurrenceAt time.Time `db:"occurrence_at" json:"occurrence_at"`
	JobID        int64     `db:"job_id" json:"job_id"`
	EnqueuedAt   time.Time `db:"enqueued_at" json:"enqueued_at"`
	// State is the job's state; empty when the cleaner has deleted it
	// (it had succeeded).
	State State `db:"state" json:"state"`
	// DeadLetterID is the letter the job became, if it died.
	DeadLetterID *int64 `db:"dead_letter_id" json:"dead_letter_id"`
}

// Outcome is the run's outcome in a word: a job state, or "succeeded"
// when the cleaner has already deleted its job (only succeeded jobs are).
func (r ScheduleRun) Outcome() State {
	if r.State == "" {
		return StateSucceeded
	}
	return r.State
}

// ScheduleChangeParams disable or enable a schedule.
type ScheduleChangeParams struct {
	Name    string
	Enabled bool
	Reason  string
	Actor   Actor
	Now     time.Time
	// Key is the request's idempotency key: a repeat returns the first
	// result instead of changing and auditing again.
	Key string
}

// Valid names each bad field.
func (p ScheduleChangeParams) Valid() map[string]string {
	problems := map[string]string{}
	if msg := TaskNameProblem(p.Name); msg != "" {
		problems["name"] = msg
	}
	switch reason := strings.TrimSpace(p.Reason); {
	case reason == "":
		problems["reason"] = "say why: the reason is kept in the audit trail and shown on the schedules page"
	case utf8.RuneCountInString(reason) > MaxScheduleReason:
		problems["reason"] = fmt.Sprintf("at most %d characters", MaxScheduleReason)
	}
	return problems
}

// ScheduleChangeResult is the schedule after the change.
type ScheduleChangeResult struct {
	Schedule Schedule `json:"schedule"`
	AuditID  int64    `json:"audit_event_id"`
	Repeated bool     `json:"repeated"`
}
