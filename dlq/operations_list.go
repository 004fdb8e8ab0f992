package dlq

// Operation list sizes: the list is a recent-first window for on-call
// eyes (the console's /operations, the remote CLI, the API), paged with a
// keyset cursor on id; the audit trail is the archive.
const (
	DefaultOperationLimit = 50
	MaxOperationLimit     = 200
)

// OperationPhase groups states by whether an operation can still act:
// open (not Finished) or finished. It is how a list asks for "everything
// in flight" without naming the states in between, which change.
type OperationPhase string

// The phases.
const (
	PhaseOpen     OperationPhase = "open"
	PhaseFinished OperationPhase = "finished"
)

// OperationListFilter selects operations, newest first. Zero values do not
// filter.
type OperationListFilter struct {
	State OperationState // one state
	Phase OperationPhase // open or finished, whatever the state
	Kind  OperationKind
	Actor string // who started it, in any case
	// Before continues the list with operations whose id is smaller; 0 is
	// the newest page.
	Before int64
	Limit  int
}

// Narrowed reports whether f filters by anything.
func (f OperationListFilter) Narrowed() bool {
	return f.State != "" || f.Phase != "" || f.Kind != "" || f.Actor != ""
}

// OperationPage is one page of the operation list.
type OperationPage struct {
	Operations []Operation
	// Next continues after the last operation (pass it as Before); 0 on
	// the last page.
	Next int64
}

// InFlight is what the banner on every page shows: the newest open
// operations and how many are open in all.
type InFlight struct {
	Operations []Operation // newest first, at most the limit asked for
	Open       int
}
