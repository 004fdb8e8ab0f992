package worker

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"time"
)

// Permanent marks err as a failure that will repeat however often the job
// is retried (bad input, a declined card, a deleted record): the job is
// dead-lettered at once with reason permanent. Permanent(nil) is nil. The
// error's message, class and traceback are those of err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// isPermanent reports whether err's tree holds a Permanent error. Here and
// below errors.AsType rather than errors.As: on every failed attempt the
// reflection inside errors.As was a tenth of the worker's CPU in a burst
// of dead letters (pprof).
func isPermanent(err error) bool {
	_, ok := errors.AsType[*permanentError](err)
	return ok
}

// tracerError and classedError are the interfaces through which any
// error in a chain offers its traceback and its class.
type (
	tracerError interface {
		error
		Traceback() string
	}
	classedError interface {
		error
		ErrorClass() string
	}
)

// WithTraceback attaches the call stack at the point it is called to err, so
// the dead letter shows where the failure was detected. An error that
// already carries a traceback is returned unchanged: the first capture is
// the one closest to the cause. WithTraceback(nil) is nil.
func WithTraceback(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[tracerError](err); ok {
		return err
	}
	pcs := make([]uintptr, 32)
	n := runtime.Callers(2, pcs) // skip runtime.Callers and WithTraceback
	return &tracedError{err: err, stack: formatFrames(pcs[:n])}
}

type tracedError struct {
	err   error
	stack string
}

func (e *tracedError) Error() string     { return e.err.Error() }
func (e *tracedError) Unwrap() error     { return e.err }
func (e *tracedError) Traceback() string { return e.stack }

// formatFrames renders a stack the way Go prints one in a panic, which is
// what anyone reading a Go traceback expects.
func formatFrames(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function != "" && f.Function != "runtime.goexit" {
			fmt.Fprintf(&b, "%s(...)\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}

// panicError is a recovered panic. Its traceback is the stack of the
// panicking goroutine, taken inside the deferred recover so that it still
// shows the frame that panicked.
type panicError struct {
	value any
	stack string
}

// Error is the panic value alone: the class already says "panic".
func (e *panicError) Error() string {
	if err, ok := e.value.(error); ok {
		return err.Error()
	}
	return fmt.Sprint(e.value)
}
func (e *panicError) ErrorClass() string { return "panic" }
func (e *panicError) Traceback() string  { return e.stack }

// Unwrap exposes a panicked error value to errors.Is and errors.As.
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}

// unknownTaskError is the failure of a job no handler here can run.
type unknownTaskError struct {
	task   string
	worker string
	known  []string
}

func (e *unknownTaskError) Error() string {
	return fmt.Sprintf("no handler registered for task %q on worker %s (it runs: %s)",
		e.task, e.worker, strings.Join(e.known, ", "))
}
func (e *unknownTaskError) ErrorClass() string { return "UnknownTask" }

// timeoutError is the cause given to a job's context when its timeout
// fires, so the worker can tell its own deadline from one inside the
// handler. The handler's error is then wrapped in it: whatever the handler
// returned, the timeout is why it failed.
type timeoutError struct {
	task  string
	after time.Duration
	err   error // what the handler returned; nil while it is the cause
}

func (e *timeoutError) Error() string {
	msg := fmt.Sprintf("task %s did not finish within its %s timeout", e.task, e.after)
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}
func (e *timeoutError) Unwrap() error      { return e.err }
func (e *timeoutError) ErrorClass() string { return "Timeout" }

// errorClass names the kind of failure for grouping and display: the class
// the error declares through an ErrorClass() string method anywhere in its
// chain, else the Go type of its first error that is more than a wrapper.
func errorClass(err error) string {
	if c, ok := errors.AsType[classedError](err); ok {
		if class := c.ErrorClass(); class != "" {
			return class
		}
	}
	return typeName(meaningful(err))
}

// meaningful skips the wrappers that only add a message prefix or a flag
// (fmt.Errorf's %w, errors.Join, url.Error, this package's own) and returns
// the first error whose type says something about what went wrong. A url.Error
// counts as a wrapper because its type is the same for every failure an HTTP
// client can have; the error inside it (net.OpError, x509 errors, ...) is the
// informative one.
func meaningful(err error) error {
	for err != nil {
		var next error
		switch e := err.(type) {
		case *permanentError:
			next = e.err
		case *tracedError:
			next = e.err
		case *url.Error:
			next = e.Err
		default:
			if !isFmtOrJoinWrapper(err) {
				return err
			}
			next = firstUnwrapped(err)
		}
		if next == nil {
			return err
		}
		err = next
	}
	return nil
}

func isFmtOrJoinWrapper(err error) bool {
	switch reflect.TypeOf(err).String() {
	case "*fmt.wrapError", "*fmt.wrapErrors", "*errors.joinError":
		return true
	}
	return false
}

func firstUnwrapped(err error) error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return u.Unwrap()
	case interface{ Unwrap() []error }:
		if errs := u.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}

// typeName renders an error's type without the pointer star: *net.OpError
// is "net.OpError". The anonymous error types of errors.New and the context
// package get their conventional names.
func typeName(err error) string {
	switch {
	case err == nil:
		return "error"
	case err == context.DeadlineExceeded:
		return "context.DeadlineExceeded"
	case err == context.Canceled:
		return "context.Canceled"
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "errors" && t.Name() == "errorString" {
		return "error"
	}
	if t.Name() == "" {
		return "error"
	}
	return t.String()
}

// traceback returns the traceback the error carries, if any, through a
// Traceback() string method anywhere in its chain.
func traceback(err error) string {
	if t, ok := errors.AsType[tracerError](err); ok {
		return t.Traceback()
	}
	return ""
}

// abandonedError is the failure of an attempt whose handler did not return
// within abandonAfter of its context being cancelled.
type abandonedError struct {
	task  string
	after time.Duration
	cause error // why the context was cancelled
}

func (e *abandonedError) Error() string {
	return fmt.Sprintf("task %s ignored cancellation (%v) and was abandoned after %s more", e.task, e.cause, e.after)
}
func (e *abandonedError) Unwrap() error      { return e.cause }
func (e *abandonedError) ErrorClass() string { return "Abandoned" }
