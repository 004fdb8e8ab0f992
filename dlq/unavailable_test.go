package dlq_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"AdminShutdown", &pq.Error{Code: "57P01"}, true},
		{"CannotConnectNow", fmt.Errorf("list: %w", &pq.Error{Code: "57P03"}), true},
		{"ConnectionFailure", &pq.Error{Code: "08006"}, true},
		{"DialRefused", fmt.Errorf("begin: %w", dial), true},
		{"Reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"CutShort", io.ErrUnexpectedEOF, true},
		{"Sentinel", fmt.Errorf("x: %w", dlq.ErrUnavailable), true},
		{"UniqueViolation", &pq.Error{Code: "23505"}, false},
		{"QueryCanceled", &pq.Error{Code: "57014"}, false},
		{"NotFound", dlq.ErrNotFound, false},
		{"EmptyBody", io.EOF, false},
		{"Nil", nil, false},
		{"Other", errors.New("boom"), false},
	} {
		if got := dlq.IsUnavailable(c.err); got != c.want {
			t.Errorf("%s: IsUnavailable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
