package dlq

import (
	"fmt"
	"time"
)

// ReadState says where the console's heavy reads go, and why.
type ReadState struct {
	// OnReplica: reads go to the replica. Otherwise they go to the primary,
	// and Problem says why.
	OnReplica bool
	// Lag is how far behind the primary the replica was at CheckedAt, when
	// Measured.
	Lag      time.Duration
	Measured bool
	// Problem is why reads fell back to the primary, as a phrase that
	// follows "the read replica": "is 42 s behind (more than 30 s)",
	// "cannot be reached". Empty while reads go to the replica.
	Problem   string
	CheckedAt time.Time
}

// FormatLag writes a lag as a person reads it: "1.4 s", "42 s", "3 min 5 s".
func FormatLag(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	default:
		d = d.Round(time.Second)
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
}
