package dlq

// OperationLanes is how many batches of one operation run at once once it
// may run in lanes (Operation.Laned). A batch is one statement in one
// backend, so one stream of batches keeps one core of the database busy
// and leaves the others idle; two lanes keep two busy, and each lane's
// commit (the WAL flush of its batch) overlaps with the other's work.
const OperationLanes = 2

// Laned reports whether the operation's batches may run in lanes: not
// while paced (a pace is one sequence of start slots) and not before its
// canary is through (the canary is its first Canary letters, and it stops
// after exactly those), and not while the died-again guard has yet to judge.
func (op Operation) Laned() bool {
	return op.RatePerSecond == nil && !(op.Kind == OpReplay && op.Canary > 0 && op.Done < int64(op.Canary)) &&
		!op.GuardPending() // the guard's window is counted in one stream
}
