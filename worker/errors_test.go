package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

type declaredClassError struct{}

func (declaredClassError) Error() string      { return "card declined" }
func (declaredClassError) ErrorClass() string { return "PaymentDeclined" }

type tracebackError struct{}

func (tracebackError) Error() string { return "remote failure" }
func (tracebackError) Traceback() string {
	return "Traceback (most recent call last):\n  File \"app.py\""
}

func TestErrorClass(t *testing.T) {
	t.Parallel()
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	_, numErr := strconv.Atoi("x")
	var syntaxErr error = json.Unmarshal([]byte("{"), new(any))

	cases := []struct {
		name string
		err  error
		want string
	}{
		{"ErrorsNewIsError", errors.New("boom"), "error"},
		{"ErrorfWithoutWrapIsError", fmt.Errorf("boom %d", 1), "error"},
		{"PointerStarDropped", opErr, "net.OpError"},
		{"WrapperSkipped", fmt.Errorf("charge order 42: %w", opErr), "net.OpError"},
		{"DoubleWrapperSkipped", fmt.Errorf("a: %w", fmt.Errorf("b: %w", opErr)), "net.OpError"},
		{"URLErrorSkippedForItsCause", &url.Error{Op: "Get", URL: "http://x", Err: opErr}, "net.OpError"},
		{"JoinTakesFirst", errors.Join(numErr, opErr), "strconv.NumError"},
		{"MultiWrapTakesFirst", fmt.Errorf("%w and %w", syntaxErr, opErr), "json.SyntaxError"},
		{"PathErrorKeepsPackage", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}, "fs.PathError"},
		{"DeclaredClassWins", fmt.Errorf("wrapped: %w", declaredClassError{}), "PaymentDeclined"},
		{"PermanentIsTransparent", Permanent(opErr), "net.OpError"},
		{"PermanentKeepsDeclaredClass", Permanent(declaredClassError{}), "PaymentDeclined"},
		{"TracebackIsTransparent", WithTraceback(fmt.Errorf("x: %w", opErr)), "net.OpError"},
		{"HandlerDeadlineIsContextDeadline", fmt.Errorf("query: %w", context.DeadlineExceeded), "context.DeadlineExceeded"},
		{"Canceled", context.Canceled, "context.Canceled"},
		{"JobTimeoutIsTimeout", &timeoutError{task: "t", after: time.Second, err: context.DeadlineExceeded}, "Timeout"},
		{"JobTimeoutBeatsDeclaredClass", &timeoutError{task: "t", after: time.Second, err: declaredClassError{}}, "Timeout"},
		{"PanicIsPanic", &panicError{value: "x"}, "panic"},
		{"UnknownTask", &unknownTaskError{task: "x"}, "UnknownTask"},
		{"NilSafe", nil, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := errorClass(c.err); got != c.want {
				t.Fatalf("errorClass(%T %v) = %q, want %q", c.err, c.err, got, c.want)
			}
		})
	}
}

func failDeepInside() error { return WithTraceback(errors.New("ledger out of balance")) }

func TestTraceback(t *testing.T) {
	t.Parallel()

	t.Run("WithTracebackCapturesCallSite", func(t *testing.T) {
		t.Parallel()
		err := failDeepInside()
		tb := traceback(fmt.Errorf("post entry: %w", err))
		if !strings.Contains(tb, "worker.failDeepInside") || !strings.Contains(tb, "errors_test.go:") {
			t.Fatalf("traceback lacks the call site:\n%s", tb)
		}
		if strings.Contains(tb, "worker.WithTraceback") {
			t.Fatalf("traceback includes WithTraceback itself:\n%s", tb)
		}
		if err.Error() != "ledger out of balance" {
			t.Fatalf("message changed: %q", err.Error())
		}
	})

	t.Run("FirstCaptureKept", func(t *testing.T) {
		t.Parallel()
		err := failDeepInside()
		if again := WithTraceback(fmt.Errorf("outer: %w", err)); traceback(again) != traceback(err) {
			t.Fatal("a second WithTraceback replaced the first traceback")
		}
	})

	t.Run("DeclaredTracebackUsed", func(t *testing.T) {
		t.Parallel()
		if tb := traceback(fmt.Errorf("x: %w", tracebackError{})); !strings.HasPrefix(tb, "Traceback (most recent") {
			t.Fatalf("got %q", tb)
		}
	})

	t.Run("PlainErrorHasNone", func(t *testing.T) {
		t.Parallel()
		if tb := traceback(errors.New("x")); tb != "" {
			t.Fatalf("got %q", tb)
		}
	})

	t.Run("NilStaysNil", func(t *testing.T) {
		t.Parallel()
		if WithTraceback(nil) != nil || Permanent(nil) != nil {
			t.Fatal("wrapping nil must give nil")
		}
	})
}

func TestDecide(t *testing.T) {
	t.Parallel()
	delay := func(attempt int) time.Duration { return time.Duration(attempt) * time.Second }
	transient := errors.New("connection reset")

	cases := []struct {
		name         string
		attempt, max int
		err, stop    error
		want         decision
	}{
		{"SuccessCompletes", 1, 3, nil, nil, decision{act: actComplete}},
		{"SuccessDuringShutdownStillCompletes", 1, 3, nil, errShutdown, decision{act: actComplete}},
		{"TransientRetriesWithPolicyDelay", 2, 3, transient, nil, decision{act: actRetry, delay: 2 * time.Second}},
		{"TransientOnLastAttemptExhausts", 3, 3, transient, nil, decision{act: actDeadLetter, reason: "exhausted"}},
		{"PermanentDeadLettersAtOnce", 1, 5, Permanent(transient), nil, decision{act: actDeadLetter, reason: "permanent"}},
		{"WrappedPermanentStillPermanent", 1, 5, fmt.Errorf("x: %w", Permanent(transient)), nil, decision{act: actDeadLetter, reason: "permanent"}},
		{"PanicIsTransient", 1, 5, &panicError{value: "x"}, nil, decision{act: actRetry, delay: time.Second}},
		{"TimeoutIsTransient", 1, 5, &timeoutError{err: context.DeadlineExceeded}, nil, decision{act: actRetry, delay: time.Second}},
		{"ShutdownHandsBack", 3, 3, context.Canceled, errShutdown, decision{act: actHandBack}},
		{"LostLeaseDiscards", 1, 3, context.Canceled, errLeaseLost, decision{act: actDiscard}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := decide(c.attempt, c.max, c.err, c.stop, delay); got != c.want {
				t.Fatalf("decide = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	if got := truncate("short", 10); got != "short" {
		t.Fatalf("got %q", got)
	}
	got := truncate(strings.Repeat("é", 10), 5) // 2-byte runes: cut must not split one
	if got != "éé… (truncated)" {
		t.Fatalf("got %q", got)
	}
}
