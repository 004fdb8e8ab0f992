package dlq

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxAttemptLogBytes bounds the lines one attempt keeps of what its task
// logged (Attempt.Logs): every failed attempt is kept in its job's history
// and copied into its dead letter, so, like the traceback, the lines must
// not bloat every row they touch. Past it whole lines are dropped and the
// cut is said in one last line (LogsCutNote).
const MaxAttemptLogBytes = 64 << 10

// LogsCutNote is the last line of an attempt's logs cut at
// MaxAttemptLogBytes: "… 12 more lines, 3.1 KiB, cut".
func LogsCutNote(lines, bytes int) string {
	noun := "lines"
	if lines == 1 {
		noun = "line"
	}
	size := fmt.Sprintf("%d B", bytes)
	if bytes >= 1<<10 {
		size = fmt.Sprintf("%.1f KiB", float64(bytes)/(1<<10))
	}
	return fmt.Sprintf("… %d more %s, %s, cut", lines, noun, size)
}

var cutNoteRE = regexp.MustCompile(`\n?… \d+ more lines?, [\d.]+ (B|KiB), cut\n?$`)

// LogsWereCut reports whether an attempt's logs end in LogsCutNote.
func LogsWereCut(logs string) bool {
	return strings.HasSuffix(logs, "cut\n") && cutNoteRE.MatchString(logs)
}
