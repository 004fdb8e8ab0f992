// Package reliability holds the suites that check Redrive's guarantees
// under failure, end to end, against real Postgres and real worker
// processes. It has no code of its own: everything is in its tests.
//
//   - Crash: three worker processes run a few thousand jobs whose effect is
//     guarded by worker.ProcessOnce and a version; a driver SIGKILLs a
//     random worker about every second and restarts it. Every job ends
//     terminal, every effect is applied exactly once, and no older version
//     is left over a newer one.
//   - Rolling deploy: each worker in turn gets SIGTERM while long jobs run.
//     Jobs that fit the shutdown grace finish; the rest are handed back at
//     once, their attempt given back, and keep their place in the queue.
//   - Database restart and outage: Postgres restarts (fast and immediate)
//     under running workers and an operator's bulk replay. Nothing is lost
//     or doubled, no job is misjudged (no lease_expired letter while its
//     worker kept heartbeating), pages and the API answer 503 while it is
//     down, and everything recovers by itself.
//   - Poison: a task that panics, one that outlives its timeout, one that
//     ignores cancellation, and one whose process dies at every pick-up.
//     Each ends as a dead letter after max_attempts and never holds a slot
//     for ever.
//   - Races: concurrent single replays with and without one idempotency
//     key, concurrent bulk replays through two console instances, a bulk
//     replay racing a bulk discard, and two migrations at once.
//   - Load: 50 concurrent readers during a bulk replay, with a worker
//     running: no errors, and p50 and p99 per page.
//
// Each suite is a test in `make test`, sized for CI (short mode, the
// default). `make reliability` runs them in long mode (-long: more jobs,
// more kills, a minute of load) and prints each suite's figures, the lines
// starting "figures:", for docs/architecture.md ("Reliability").
//
// Worker processes are this test binary run again with REDRIVE_RELIABILITY_CHILD
// set (see child_test.go), so a suite can SIGKILL or SIGTERM them. Every
// suite that stops the database runs its own private cluster
// (storetest.NewPrivate); the others use a fresh database of the shared test
// server (storetest.NewDB). Servers and loads listen on 127.0.0.1 only.
package reliability
