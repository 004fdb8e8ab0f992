package remote

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A test job from a terminal, followed with --wait against a real worker:
// billing.charge's fix works (exit 0), reports.build's does not (an error
// naming the test job's error and its letter filed as a test); the letters
// stay pending; bad flags are usage errors.
func TestTestRun(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	ok := c.letters(t, 1, "billing.charge", "fp-ok", time.Now())[0]
	broken := c.letters(t, 1, "reports.build", "fp-broken", time.Now())[0]

	out, err := c.run(t, "test-run", strconv.FormatInt(ok, 10), "--kwargs", `{"region": "us"}`, "--reason", "try it", "--wait", "--interval", "20ms")
	if err != nil || !strings.Contains(out, "stays pending") || !strings.Contains(out, "succeeded: the fix works") {
		t.Fatalf("test run of letter %d: %v\n%s", ok, err, out)
	}
	_, err = c.run(t, "test-run", strconv.FormatInt(broken, 10), "--wait", "--interval", "20ms")
	if err == nil || !strings.Contains(err.Error(), "died: ") || !strings.Contains(err.Error(), "template reports/q3.tmpl not found") ||
		!strings.Contains(err.Error(), "filed as a test") {
		t.Fatalf("test run of letter %d: %v; want its death in words", broken, err)
	}
	var pending int
	if err := c.db.Get(&pending, `SELECT count(*) FROM dead_letters WHERE id = ANY(ARRAY[$1, $2]::bigint[]) AND status = 'pending'`, ok, broken); err != nil || pending != 2 {
		t.Fatalf("%d of the 2 letters pending after their test runs (%v)", pending, err)
	}
	for _, args := range [][]string{
		{"test-run"},
		{"test-run", "abc"},
		{"test-run", "1", "--args", "[1,"},
		{"test-run", "1", "--start-at", "tomorrow"},
	} {
		if _, err := c.run(t, args...); !errors.As(err, new(*UsageError)) {
			t.Errorf("%q: %v; want a usage error", args, err)
		}
	}
}
