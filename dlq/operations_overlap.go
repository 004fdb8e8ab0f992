package dlq

// Overlap is an open operation that will still act on some of the letters
// a new selection holds: a second engineer about to replay what a first
// one's operation is already replaying (or discarding) should know.
type Overlap struct {
	Operation Operation
	// Letters counts the pending letters of the selection the operation
	// also covers (its selection, up to its bound) and has not handled yet.
	Letters int64
}
