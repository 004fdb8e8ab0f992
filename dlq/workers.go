package dlq

import (
	"time"

	"github.com/lib/pq"
)

// WorkerInfo is a worker process as it registers itself.
type WorkerInfo struct {
	ID          string         `db:"id" json:"id"`
	Host        string         `db:"host" json:"host"`
	PID         int            `db:"pid" json:"pid"`
	Version     string         `db:"version" json:"version"`
	Queues      pq.StringArray `db:"queues" json:"queues"`
	Tasks       pq.StringArray `db:"tasks" json:"tasks"`
	Concurrency int            `db:"concurrency" json:"concurrency"`
	InFlight    int            `db:"in_flight" json:"in_flight"`
	StartedAt   time.Time      `db:"started_at" json:"started_at"`
	HeartbeatAt time.Time      `db:"heartbeat_at" json:"heartbeat_at"`
}

// WorkerForgetAfter is how long a worker that stopped heartbeating (a
// crash, an OOM kill: it never unregistered) stays listed as stale before
// its row is deleted. An hour keeps it in view through an incident; leases
// are far shorter, so its jobs were rescued long before.
const WorkerForgetAfter = time.Hour
