package dlq

import "time"

// ActionJobEnqueue is the audit action of a job an operator enqueued by
// hand from the console (the jobs page's "Enqueue a job"). Producers'
// enqueues through the API are their own traffic, not audited.
const ActionJobEnqueue = "job_enqueue"

// EnqueueJobParams is an operator's enqueue: the job, who asks and why.
type EnqueueJobParams struct {
	Job    EnqueueParams
	Actor  Actor
	Reason string
	Now    time.Time
	// Key is the form's one-time key: a double click enqueues one job.
	Key string
}

// EnqueueJobResult is the job an operator's enqueue made, and its audit
// entry.
type EnqueueJobResult struct {
	JobID    int64 `json:"job_id"`
	AuditID  int64 `json:"audit_event_id"`
	Repeated bool  `json:"repeated,omitempty"`
}
