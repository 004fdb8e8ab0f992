package dlq

import (
	"time"
)

// PurgeParams asks for old, settled dead letters to be deleted.
type PurgeParams struct {
	// OlderThan: letters replayed or discarded before Now - OlderThan go.
	// Pending letters are never purged.
	OlderThan time.Duration
	Actor     Actor
	Now       time.Time
	// BatchSize bounds each delete's transaction; default 5000.
	BatchSize int
}
