package handlers

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redrive/redrive/dlq"
)

// ParseJobFilter reads a filter from a query string. A bad value is a
// *ValidationError naming the parameter, so the console can answer 400 with
// words rather than an empty list. Unknown parameters are ignored.
func ParseJobFilter(q url.Values) (dlq.JobFilter, error) {
	f := dlq.JobFilter{Limit: dlq.DefaultJobPageSize}
	problems := map[string]string{}
	if v := q.Get("state"); v != "" {
		if s := dlq.State(v); s.Valid() {
			f.State = s
		} else {
			problems["state"] = fmt.Sprintf("must be one of %s", joinStates(dlq.States))
		}
	}
	for _, p := range []struct {
		key     string
		dst     *string
		problem func(string) string
	}{{"queue", &f.Queue, dlq.QueueNameProblem}, {"task", &f.Task, dlq.TaskNameProblem}} {
		v := q.Get(p.key)
		if v == "" {
			continue
		}
		if msg := p.problem(v); msg != "" {
			problems[p.key] = msg
			continue
		}
		*p.dst = v
	}
	f.Before = parseJobCursor(q.Get("before"), "before", problems)
	f.After = parseJobCursor(q.Get("after"), "after", problems)
	if f.Before != 0 && f.After != 0 {
		problems["after"] = "cannot be combined with before"
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > dlq.MaxJobPageSize {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", dlq.MaxJobPageSize)
		} else {
			f.Limit = n
		}
	}
	if len(problems) > 0 {
		return dlq.JobFilter{}, &dlq.ValidationError{Fields: problems}
	}
	return f, nil
}

// parseJobCursor reads a job id cursor; a bad one is noted in problems.
func parseJobCursor(v, key string, problems map[string]string) int64 {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		problems[key] = "must be a job id (a positive whole number)"
		return 0
	}
	return n
}

// joinStates lists the states for a message.
func joinStates(ss []dlq.State) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}
