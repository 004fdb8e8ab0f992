package dlq

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/lib/pq"
)

// ErrUnavailable means the database could not be reached: the request was
// not carried out because of where it was sent, not because of what it
// said, and the same request may succeed once the database is back. The web
// layer answers it with 503 and Retry-After, so a producer can tell "retry
// later" from "your request is wrong".
var ErrUnavailable = errors.New("database unavailable")

// IsUnavailable reports whether err says the database cannot be reached
// right now: ErrUnavailable itself, a connection refused, reset or cut
// short, a dial that failed, a server shutting down (SQLSTATE 57P01 admin,
// 57P02 crash), one not yet accepting connections (57P03), any connection
// exception (class 08), or a pool whose every connection broke.
//
// It is a function rather than only a sentinel because errors reach the
// HTTP layer along many paths (BeginTx, Commit, a scan), not all of them
// through translate; it looks into the whole chain for the driver's error.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code {
		case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return pqErr.Code.Class() == "08" // connection_exception
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ENETUNREACH, syscall.EHOSTUNREACH} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		// A dial that failed, whatever the cause (a timeout, DNS), or a
		// read or write on a connection the server closed.
		return true
	}
	// A connection the server closed mid-reply. io.EOF alone is too common
	// (an empty request body) to mean the database; only lib/pq reports
	// the unexpected kind.
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// Unavailable marks err with ErrUnavailable when it is a connection
// failure, so that errors.Is(err, ErrUnavailable) holds for callers too.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !IsUnavailable(err) {
		return err
	}
	return &unavailableError{err: err}
}

// unavailableError keeps the driver's error (for the log) while matching
// ErrUnavailable.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return "database unavailable: " + e.err.Error() }

// Unwrap lets errors.Is find both ErrUnavailable and the driver's error.
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
