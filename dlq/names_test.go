package dlq_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// One rule for task and queue names, their lengths apart.
func TestNameRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		task, queue bool // valid as a task, as a queue
	}{
		{"billing.charge", true, true},
		{"a_b-c:d.e", true, true},
		{"", false, false},
		{"has space", false, false},
		{"é", false, false},
		{strings.Repeat("q", 100), true, true},
		{strings.Repeat("q", 101), true, false},
		{strings.Repeat("t", 200), true, false},
		{strings.Repeat("t", 201), false, false},
	} {
		if got := dlq.TaskNameProblem(tc.name) == ""; got != tc.task {
			t.Errorf("task %.20q: valid %v, want %v", tc.name, got, tc.task)
		}
		if got := dlq.QueueNameProblem(tc.name) == ""; got != tc.queue {
			t.Errorf("queue %.20q: valid %v, want %v", tc.name, got, tc.queue)
		}
	}
	if p := dlq.QueueNameProblem("no!"); p != "must be 1-100 letters, digits or . _ : -" {
		t.Errorf("the problem reads %q", p)
	}
}
