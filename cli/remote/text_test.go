package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/store/storetest"
)

// hostile holds what a payload quoted in an error can carry to a
// terminal: OSC 0 (the window's title), BEL, CSI erase and cursor moves
// with a fake line, OSC 52 (the clipboard), a C1 CSI, DEL, a carriage
// return and a right-to-left override.
const hostile = "\x1b]0;pwned\x07\x1b[2J\x1b[1;1HFAKE: all replayed OK\x1b]52;c;ZXZpbA==\x07\u009b31m\x7f\r\u202egnp.exe"

// TestControlCharactersAreShownVisibly: no control character from the
// console reaches the terminal in any printed field; tracebacks keep
// their lines.
func TestControlCharactersAreShownVisibly(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	task := "billing.charge" + hostile
	id := storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{JobID: 5000000, Task: task, Queue: "q" + hostile,
		ErrorClass: "Err" + hostile, Message: "order ord_1 " + hostile, Fingerprint: "fp" + hostile,
		Args: `["\u001b]52;c;ZXZpbA==\u0007", "` + "\u009b" + `2J"]`, Kwargs: `{"k": "\u001b[2J"}`,
		Traceback: "Traceback (most recent call last):\n  File \"a.py\", line 1\n" + hostile + "\nKeyError",
		History:   `[{"attempt": 1, "outcome": "dead\u001b[2J", "error_class": "E\u0007", "message": "m\u001b]0;t\u0007"}]`,
		FailedAt:  time.Now()})
	if _, err := c.run(t, "discard", "--ids", fmt.Sprint(id), "--reason", "cleanup "+hostile, "--wait", "--interval", "50ms"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"letters", "list", "--status", "all"},
		{"letters", "show", fmt.Sprint(id)},
		{"groups"},
		{"operations", "list"},
	} {
		var out, errOut bytes.Buffer
		getenv := func(k string) string { return map[string]string{EnvURL: c.url, EnvToken: c.token}[k] }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := Run(ctx, args, getenv, &out, &errOut)
		cancel()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		text := out.String() + errOut.String()
		if bad := controlIn(text); bad != "" {
			t.Errorf("%v printed the control character %s:\n%q", args, bad, text)
		}
		if !strings.Contains(text, `\x1b]0;pwned\x07`) {
			t.Errorf("%v should show the escape sequence visibly:\n%s", args, text)
		}
		if len(args) > 1 && args[1] == "show" && !strings.Contains(text, "Traceback (most recent call last):\n  File \"a.py\", line 1\n") {
			t.Errorf("the traceback lost its lines:\n%s", text)
		}
	}
}

// controlIn returns the first control character of s but newline and
// tab, quoted, or "".
func controlIn(s string) string {
	for i, r := range s {
		if r == utf8.RuneError || r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || isC1(r) || isBidiControl(r) {
			return fmt.Sprintf("%q at byte %d", r, i)
		}
	}
	return ""
}

func TestVisible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, oneLine, block string }{
		{"plain text", "plain text", "plain text"},
		{"a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"line one\nline two\tx", "line one line two x", "line one\nline two\tx"},
		{"bell\x07 del\x7f cr\r", `bell\x07 del\x7f cr`, `bell\x07 del\x7f cr\x0d`},
		{"c1 \u009b31m nel\u0085", `c1 \u009b31m nel`, `c1 \u009b31m nel\u0085`},
		{"rtl \u202eexe", `rtl \u202eexe`, `rtl \u202eexe`},
		{"broken \xff utf-8", `broken \xff utf-8`, `broken \xff utf-8`},
		{"naïve café ✓", "naïve café ✓", "naïve café ✓"},
	} {
		if got := oneLine(tc.in); got != tc.oneLine {
			t.Errorf("oneLine(%q) = %q; want %q", tc.in, got, tc.oneLine)
		}
		if got := block(tc.in); got != tc.block {
			t.Errorf("block(%q) = %q; want %q", tc.in, got, tc.block)
		}
	}
	err := shownError{&APIError{Status: 400, Code: "invalid", Message: "bad \x1b]0;x\x07"}}
	if got := err.Error(); strings.ContainsRune(got, 0x1b) || !strings.Contains(got, `\x1b]0;x\x07`) {
		t.Errorf("error text %q", got)
	}
	if ae := (*APIError)(nil); !errors.As(err, &ae) {
		t.Error("a shown error should still be the API's error")
	}
}
