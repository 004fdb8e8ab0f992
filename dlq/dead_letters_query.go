package dlq

import (
	"time"
)

// The console's reads of dead letters. Every list is newest first on
// (failed_at DESC, id DESC) and continues with a keyset cursor, so whichever
// composite index matches the filter (task, queue, status, fingerprint,
// error_class: see migrations) serves any page as one short range scan.

// LetterCountCap is where a count that has to read letters stops: past it the
// console says "10,000+", because an exact count of a million rows on
// every page view would cost more than the page itself.
const LetterCountCap = 10_000

// DeadLetterPage is one page of the list.
type DeadLetterPage struct {
	Letters []DeadLetter
	// Next continues after the last letter; nil on the last page.
	Next *Cursor
	// NotYetSearchable, on a search (Filter.Q), counts the letters written
	// too recently to be indexed for search yet (SearchBacklog): search
	// cannot have found them.
	NotYetSearchable int64
}

// Count is how many letters match a filter. When Exact is false, N is
// LetterCountCap and the true number is larger; when TooSlow is true the
// count gave up after its time budget and N means nothing.
type Count struct {
	N       int64
	Exact   bool
	TooSlow bool
}

// DefaultCountBudget is how long a capped count may take before the page is shown
// without it: the list itself takes a few milliseconds, and a page view
// must stay well under 100 ms.
const DefaultCountBudget = 30 * time.Millisecond
