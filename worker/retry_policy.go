package worker

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Defaults for RetryPolicy. One second is about how long a restarting
// dependency or a failover takes to come back, so the first retry is likely
// to succeed; the cap of an hour keeps a job that failed during a long
// outage from sleeping for many hours after the outage ends. The binary's
// --retry-base and --retry-cap default to these too.
const (
	// DefaultRetryBase is the ceiling of the first retry's delay.
	DefaultRetryBase = time.Second
	// DefaultRetryCap bounds every retry delay.
	DefaultRetryCap = time.Hour
)

// RetryPolicy spaces the retries of a job that failed transiently:
// exponential backoff with full jitter, capped. The delay after attempt n is
// drawn uniformly from [0, min(Cap, Base·2^(n-1))).
//
// Full jitter rather than a fixed schedule because jobs tend to fail
// together (a dependency went down): fixed delays would send them all back
// at the same instant and knock it down again, while uniform delays spread
// the retries over the whole window.
type RetryPolicy struct {
	// Base is the ceiling of the first retry's delay. Default 1s.
	Base time.Duration
	// Cap bounds every delay. Default DefaultRetryCap (1h).
	Cap time.Duration
	// RandFunc returns a number in [0, 1); it must be safe for concurrent
	// use. Default math/rand/v2's Float64. Tests pass a fixed value: one
	// that returns 1 gives the un-jittered ceilings.
	RandFunc func() float64
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	p.Base = cmp.Or(p.Base, DefaultRetryBase)
	p.Cap = cmp.Or(p.Cap, DefaultRetryCap)
	if p.RandFunc == nil {
		p.RandFunc = rand.Float64
	}
	return p
}

func (p RetryPolicy) validate() error {
	if p.Base <= 0 {
		return errors.New("RetryPolicy.Base must be positive")
	}
	if p.Cap < p.Base {
		return fmt.Errorf("RetryPolicy.Cap %s must be at least Base %s", p.Cap, p.Base)
	}
	return nil
}

// Ceiling is the largest delay the policy may choose after attempt
// (1-based): min(Cap, Base·2^(attempt-1)).
func (p RetryPolicy) Ceiling(attempt int) time.Duration {
	p = p.withDefaults()
	return p.ceiling(attempt)
}

func (p RetryPolicy) ceiling(attempt int) time.Duration {
	n := max(attempt-1, 0)
	// Comparing against Cap shifted right avoids overflowing Base<<n for
	// the large attempt numbers a max_attempts of 100 allows.
	if n < 63 && p.Base <= p.Cap>>n {
		return p.Base << n
	}
	return p.Cap
}

// nextRetryDelay is the delay before the attempt after attempt, given a
// random number source. It is pure so the schedule can be table-tested.
func (p RetryPolicy) nextRetryDelay(attempt int, rand func() float64) time.Duration {
	r := rand()
	// Clamp a misbehaving source rather than let it exceed the cap or go
	// negative.
	r = min(max(r, 0), 1)
	return time.Duration(r * float64(p.ceiling(attempt)))
}
