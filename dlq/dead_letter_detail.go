package dlq

import "encoding/json"

// Caps on what one letter's detail returns. A traceback of a recursion gone
// wrong can be megabytes; nobody reads past the first few hundred KiB, and
// a page or API answer of several MB helps no one at 3 a.m.
const (
	// TracebackCap is the most characters of the final traceback returned.
	TracebackCap = 256 << 10
	// AttemptTracebackCap is the most characters of each attempt's own
	// traceback in the history.
	AttemptTracebackCap = 16 << 10
	MaxLaterLetters     = 50
)

// DeadLetterDetail is one letter with everything the detail page shows.
type DeadLetterDetail struct {
	DeadLetter
	// TracebackLen is the full traceback's length in characters; when it
	// exceeds TracebackCap, Traceback holds only the first TracebackCap,
	// followed by mask.TruncatedMark.
	TracebackLen int `db:"traceback_len" json:"traceback_length"`
	// LaterLetters are the letters that replays of this one produced: each
	// has replay_of = this letter's id.
	LaterLetters []int64 `db:"-" json:"later_letters"`
	// ExternalID is the letter's id in its source (DeadLetter.Source), for
	// a letter another system sent, and SourceKind what that source is.
	ExternalID *string `db:"external_id" json:"external_id,omitempty"`
	// SourceDetails is what the source knows of the letter beyond its
	// columns (a River job's kind, priority, tags and metadata), a JSON
	// object; nil when it said nothing.
	SourceDetails json.RawMessage `db:"-" json:"-"`
	SourceKind    SourceKind      `db:"source_kind" json:"-"`
	// SourceReplayURL says the letter's source (an HTTP one) names a
	// replay endpoint, where its replays are posted.
	SourceReplayURL bool `db:"-" json:"-"`
}

// CanReplay says whether the letter can be replayed from the console, and
// why not when it cannot: a letter another system sent is replayed by its
// source, where the source names a way to.
func (d DeadLetterDetail) CanReplay() (bool, string) {
	src := Source{Name: d.Source, Kind: d.SourceKind}
	if d.SourceReplayURL {
		src.ReplayURL = new(string) // its value is the console's to know, not the page's
	}
	return src.CanReplay()
}

// TracebackTruncated reports whether Traceback was cut at TracebackCap.
//
// It compares with the cap, not with Traceback, which masking shortens.
func (d DeadLetterDetail) TracebackTruncated() bool { return d.TracebackLen > TracebackCap }
