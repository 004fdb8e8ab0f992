package storetest

import (
	"testing"
	"time"
)

// pollEvery is how often WaitFor looks again.
const pollEvery = 20 * time.Millisecond

// WaitFor waits until cond holds, looking every pollEvery, and fails t
// after timeout naming what it waited for. Tests wait for what they can
// see this way, or for a component's test signal (a pass of a loop),
// never for a fixed time: a sleep either wastes time or, on a slow
// machine, proves nothing.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}
