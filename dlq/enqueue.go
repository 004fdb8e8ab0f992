package dlq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Limits on what a producer may enqueue; the schema enforces the same.
const (
	DefaultQueue       = "default"
	DefaultMaxAttempts = 5
	MaxMaxAttempts     = 100
	MaxBatch           = 10_000
	// MaxJobTimeout bounds the per-job timeout an enqueue may ask for.
	MaxJobTimeout = 24 * time.Hour
	// MaxRunAhead bounds how far ahead a job may be scheduled (run_at): a
	// job parked for years (9999-12-31) is a mistake kept for ever, and
	// later work belongs to a scheduler, as a pause's end is bounded.
	MaxRunAhead     = 365 * 24 * time.Hour
	maxPayloadBytes = 1 << 20 // args + kwargs of one job
)

// EnqueueParams describes a job to enqueue. Zero values take defaults.
type EnqueueParams struct {
	Task           string          `json:"task"`
	Queue          string          `json:"queue,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`   // a JSON array; default []
	Kwargs         json.RawMessage `json:"kwargs,omitempty"` // a JSON object; default {}
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"` // default 5
	RunAt          time.Time       `json:"run_at,omitzero"`        // default now
	// Timeout limits each attempt of this job, instead of its task's
	// timeout or the worker's default; a worker's cap (worker.Config
	// MaxTimeout, --job-timeout) still applies. 0: none of its own.
	Timeout time.Duration `json:"-"`
	// ReplayOf links a replayed job back to the dead letter it came from.
	ReplayOf *int64 `json:"-"`
}

// Normalise fills defaults and validates, returning a *ValidationError that
// names each bad field. It never touches the database.
func (p EnqueueParams) Normalise() (EnqueueParams, error) {
	p = p.withDefaults()
	problems := map[string]string{}
	p.nameProblems(problems)
	p.payloadProblems(problems)
	p.attemptProblems(problems)
	if !p.RunAt.IsZero() && p.RunAt.After(time.Now().Add(MaxRunAhead)) {
		problems["run_at"] = fmt.Sprintf("must be at most %d days ahead, not %s; a job for later belongs to a scheduler that enqueues it nearer the time",
			MaxRunAhead/(24*time.Hour), p.RunAt.UTC().Format(time.RFC3339))
	}
	if len(p.IdempotencyKey) > 255 {
		problems["idempotency_key"] = "must be at most 255 bytes"
	}
	if len(problems) > 0 {
		return p, &ValidationError{Fields: problems}
	}
	return p, nil
}

// withDefaults fills the fields left zero (or JSON null) with their
// defaults.
func (p EnqueueParams) withDefaults() EnqueueParams {
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	p.Args = orJSON(p.Args, `[]`)
	p.Kwargs = orJSON(p.Kwargs, `{}`)
	return p
}

// orJSON is raw, or def when raw is empty or null.
func orJSON(raw json.RawMessage, def string) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return json.RawMessage(def)
	}
	return raw
}

// nameProblems adds what is wrong with the task's and the queue's names.
func (p EnqueueParams) nameProblems(problems map[string]string) {
	switch {
	case p.Task == "":
		problems["task"] = "is required"
	case TaskNameProblem(p.Task) != "":
		problems["task"] = TaskNameProblem(p.Task)
	}
	if msg := QueueNameProblem(p.Queue); msg != "" {
		problems["queue"] = msg
	}
}

// payloadProblems adds what is wrong with args and kwargs: their shapes,
// then their size together (which names args, over a shape problem).
func (p EnqueueParams) payloadProblems(problems map[string]string) {
	if msg := jsonShape(p.Args, '['); msg != "" {
		problems["args"] = msg
	}
	if msg := jsonShape(p.Kwargs, '{'); msg != "" {
		problems["kwargs"] = msg
	}
	if len(p.Args)+len(p.Kwargs) > maxPayloadBytes {
		problems["args"] = "args and kwargs together must be under 1 MiB"
	}
}

// attemptProblems adds what is wrong with the bounds of the job's
// attempts: how many, and how long each may take.
func (p EnqueueParams) attemptProblems(problems map[string]string) {
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxMaxAttempts {
		problems["max_attempts"] = fmt.Sprintf("must be between 1 and %d", MaxMaxAttempts)
	}
	if p.Timeout < 0 || p.Timeout > MaxJobTimeout || (p.Timeout > 0 && p.Timeout < time.Millisecond) {
		problems["timeout"] = fmt.Sprintf("must be between 1ms and %s", MaxJobTimeout)
	}
}

// jsonShape returns "" when raw is valid JSON starting with open ('[' or '{'),
// otherwise a message saying what is wrong.
func jsonShape(raw json.RawMessage, open byte) string {
	want := "array"
	if open == '{' {
		want = "object"
	}
	if !json.Valid(raw) { // syntax only: jsonb keeps numbers float64 cannot (1e999)
		var v json.RawMessage
		return fmt.Sprintf("is not valid JSON: %v", json.Unmarshal(raw, &v))
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != open {
		return "must be a JSON " + want
	}
	return ""
}

// EnqueueResult is the job an enqueue produced, or found.
type EnqueueResult struct {
	Job Job
	// Existing is true when the idempotency key had been used before and
	// Job is that earlier job; nothing new was enqueued.
	Existing bool
}
