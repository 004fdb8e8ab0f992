package demo

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// The demo's failures are modelled on what real services return, so the
// console has realistic material: recognisable classes, messages carrying
// ids and amounts (which grouping learns are variables), and tracebacks.

// ConnectionRefusedError is a dependency refusing the TCP connection, as it
// does while restarting or failing over: transient.
type ConnectionRefusedError struct {
	Service string
	Err     *net.OpError
}

// Error describes the failure as the service reported it.
func (e *ConnectionRefusedError) Error() string {
	return e.Service + ": " + e.Err.Error()
}

// ErrorClass names the failure for grouping in the console.
func (e *ConnectionRefusedError) ErrorClass() string { return "ConnectionRefusedError" }

// Unwrap exposes the underlying *net.OpError.
func (e *ConnectionRefusedError) Unwrap() error { return e.Err }

// connectionRefused builds the error a dial to addr gets from a closed port.
func connectionRefused(service, ip string, port int) *ConnectionRefusedError {
	return &ConnectionRefusedError{Service: service, Err: &net.OpError{
		Op: "dial", Net: "tcp",
		Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: port},
		Err:  &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED},
	}}
}

// ServiceUnavailableError is an upstream answering 503 for as long as an
// outage lasts: transient, but it outlasts a job's attempts.
type ServiceUnavailableError struct {
	Service   string
	Method    string
	Path      string
	RequestID string
}

// Error describes the failure as the service reported it.
func (e *ServiceUnavailableError) Error() string {
	return fmt.Sprintf("%s returned 503 Service Unavailable for %s %s (request_id %s): upstream connect error or disconnect/reset before headers",
		e.Service, e.Method, e.Path, e.RequestID)
}

// ErrorClass names the failure for grouping in the console.
func (e *ServiceUnavailableError) ErrorClass() string { return "ServiceUnavailable" }

// PaymentDeclined is the card processor refusing a charge: retrying the
// same card for the same amount gets the same answer, so it is permanent.
type PaymentDeclined struct {
	OrderID     string
	Amount      string
	Currency    string
	DeclineCode string
	ChargeID    string
}

// Error describes the failure as the service reported it.
func (e *PaymentDeclined) Error() string {
	return fmt.Sprintf("charge %s for order %s declined: %s %s (decline_code=%s)",
		e.ChargeID, e.OrderID, e.Amount, e.Currency, e.DeclineCode)
}

// ErrorClass names the failure for grouping in the console.
func (e *PaymentDeclined) ErrorClass() string { return "PaymentDeclined" }

// ValidationError is a payload the task cannot accept: permanent until
// someone fixes the payload (edit-and-replay in the console).
type ValidationError struct {
	Field string
	// Value is quoted in the message when set: only values that are
	// safe to show (a number of seconds), never a payload or an address.
	Value   string
	Problem string
	Context string // e.g. "order ord_7Q2M9K"
}

// Error describes the failure as the service reported it.
func (e *ValidationError) Error() string {
	msg := "invalid " + e.Field
	if e.Value != "" {
		msg += fmt.Sprintf(" %q", e.Value)
	}
	if e.Context != "" {
		msg += " for " + e.Context
	}
	return msg + ": " + e.Problem
}

// ErrorClass names the failure for grouping in the console.
func (e *ValidationError) ErrorClass() string { return "ValidationError" }
