package dlq

// LeaseExpiredClass and the messages below describe a rescued job's
// attempt. The messages have no variable parts, so every crash of one task
// shares a fingerprint; who held the lease is kept in the attempt history
// instead. Which message a letter gets depends on what the lease's worker
// did: a worker that heartbeated after the lease ran out was alive, and
// saying it crashed would send the on-call engineer after the wrong thing.
const (
	LeaseExpiredClass   = "LeaseExpired"
	LeaseExpiredMessage = "the worker running this job stopped heartbeating and its lease expired (crash, OOM kill or lost connection)"
	// leaseLapsedMessage: the worker kept heartbeating but neither renewed
	// the lease nor recorded an outcome before it ran out.
	LeaseLapsedMessage = "the lease expired while its worker was still heartbeating: the worker could not renew the lease or record the outcome in time (a database outage or stall longer than the lease)"
)

// RescueResult counts what one rescue pass did.
type RescueResult struct {
	Requeued     int
	DeadLettered int
}
