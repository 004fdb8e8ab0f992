package dlq

import (
	"fmt"
	"regexp"
)

// The longest task and queue names; the jobs table's CHECK constraints say
// the same.
const (
	MaxTaskNameLen  = 200
	MaxQueueNameLen = 100
)

// namePattern is the one rule for task and queue names (their lengths
// apart): the jobs.task and jobs.queue CHECK constraints mirror it.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// TaskNameProblem says what is wrong with a task name, or "" when there is
// nothing wrong. Enqueueing, filters and the worker's registry all ask it.
func TaskNameProblem(name string) string { return nameProblem(name, MaxTaskNameLen) }

// QueueNameProblem says what is wrong with a queue name, or "" when there is
// nothing wrong.
func QueueNameProblem(name string) string { return nameProblem(name, MaxQueueNameLen) }

func nameProblem(name string, maxLen int) string {
	if len(name) > maxLen || !namePattern.MatchString(name) {
		return fmt.Sprintf("must be 1-%d letters, digits or . _ : -", maxLen)
	}
	return ""
}
