package dlq

import (
	"fmt"
	"time"
)

// LoginOutcome is how a sign-in attempt ended.
type LoginOutcome string

// Sign-in outcomes. Pending and failed attempts count towards throttling.
const (
	LoginPending   LoginOutcome = "pending"
	LoginFailed    LoginOutcome = "failed"
	LoginSucceeded LoginOutcome = "succeeded"
	// LoginThrottled was refused before its password was looked at; it is
	// not a failure, so a locked account does not stay locked for ever
	// while someone keeps trying.
	LoginThrottled LoginOutcome = "throttled"
)

// LoginHistory is the recent failed sign-ins that decide whether the next
// one is slowed or refused, newest first.
type LoginHistory struct {
	// ByPair are failures for the name from this address since the last
	// success from there: they decide the lock.
	ByPair []time.Time
	// ByName are failures for the name from any address, success or not:
	// a guesser spread over many addresses shows up only here.
	ByName []time.Time
	// ByAddr are failures from the address, for any name.
	ByAddr []time.Time
	// KnownAddr says the name signed in successfully from this address
	// since LoginAttempt.KnownSince.
	KnownAddr bool
}

// LoginAttempt is a sign-in attempt about to be checked, and how far back
// its history is read.
type LoginAttempt struct {
	Name string
	Addr string
	Now  time.Time
	// Since bounds the pair's and the address's failures; NameSince the
	// name's; KnownSince how old a success may be and still make its
	// address known.
	Since      time.Time
	NameSince  time.Time
	KnownSince time.Time
	// Limit is the most failures of each kind read.
	Limit int
}

// LoginResult is how an attempt ended, for FinishLoginAttempt.
type LoginResult struct {
	AttemptID int64
	Outcome   LoginOutcome
	// Name is the user's name on success, the name typed on failure.
	Name  string
	Actor Actor
	Now   time.Time
}

// ThrottledError refuses a sign-in attempt, unchecked, after too many
// failures: wait RetryAfter. Locked says it is the long lock rather than a
// short slow-down.
type ThrottledError struct {
	RetryAfter time.Duration
	Locked     bool
}

func (e *ThrottledError) Error() string {
	if e.Locked {
		return fmt.Sprintf("too many failed sign-ins: signing in is locked for %s", e.RetryAfter.Round(time.Minute))
	}
	return fmt.Sprintf("too many failed sign-ins: wait %s", e.RetryAfter.Round(time.Second))
}
