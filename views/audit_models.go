package views

// AuditFilterForm holds the audit filter inputs as typed, with problems.
type AuditFilterForm struct {
	Actor, Action, DeadLetterID, Since, Until string
	// HideSignIns leaves sign-ins and other session entries out.
	HideSignIns bool
	Problems    map[string]string
}

// AuditListView is the /audit page.
type AuditListView struct {
	Form    AuditFilterForm
	Actions []Option
	Rows    []AuditRow
	// Invalid: the filter was refused; the form names the problems.
	Invalid    bool
	Narrowed   bool
	FirstPage  bool
	NextURL    string // "" on the last page
	NewestURL  string
	ExportCSV  string
	ExportJSON string
}

// AuditEntryView is one entry's page: everything it recorded and the
// letters it touched.
type AuditEntryView struct {
	Row      AuditRow
	PrevHash string
	Hash     string
	Details  string // the stored details, pretty-printed
	Letters  []AuditLetterRow
	// LettersTotal counts every letter the entry touched ("1,234").
	LettersTotal   string
	NextLettersURL string // "" on the last page of letters
	// StartHref links a finishing or cancelling entry to the entry that
	// started its operation, where the letters are listed.
	StartHref string
	StartID   int64
}

// AuditLetterRow is one letter an entry touched.
type AuditLetterRow struct {
	ID      int64
	Href    string
	Outcome string
	Task    string // "" when the letter was purged since
	Status  string
	// StatusText says what became of a replayed letter's replay, with
	// Status the badge's class ("succeeded", "dead", "running", ...) and
	// StatusHref the letter it died again as; "" for other letters.
	StatusText string
	StatusHref string
}
