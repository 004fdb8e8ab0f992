package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
)

// Defaults for Config. The lease is long enough that a GC pause or a slow
// query does not lose it, and short enough that a crashed worker's jobs come
// back within a minute. The heartbeat (a third of the lease unless set)
// renews it three times per lease, so one missed heartbeat never loses it.
const (
	// DefaultConcurrency is how many jobs one worker runs at once. A slot
	// is a goroutine, so many cost little, and claims take a quarter of
	// the slots at a time: with 100, short jobs are claimed 25 or more per
	// round trip (about 8,000 no-op jobs/s on 2 cores; with 10, a claim
	// every few jobs held it under 2,000).
	DefaultConcurrency = 100
	// DefaultLeaseDuration is how long a claim lasts without a heartbeat.
	DefaultLeaseDuration = 30 * time.Second
	// DefaultPollInterval is how often an idle worker looks for due jobs.
	DefaultPollInterval = time.Second
	// DefaultRescueInterval is how often a worker looks for expired leases;
	// with every worker rescuing, the effective interval is shorter still.
	DefaultRescueInterval = 15 * time.Second
	// DefaultRestartGrace is how long after a Postgres restart the rescuer
	// spares leases that lapsed around it: the longest heartbeat interval
	// (maxHeartbeat), so every live worker has renewed its leases by then.
	DefaultRestartGrace = dlq.WorkerStaleAfter / 3
	// DefaultTimeout bounds one attempt of a task that sets no timeout.
	DefaultTimeout = time.Minute
	// DefaultShutdownGrace fits inside the 30 s a container runtime
	// (Kubernetes, Docker) waits between SIGTERM and SIGKILL, leaving time to
	// hand unfinished jobs back and unregister.
	DefaultShutdownGrace = 20 * time.Second
	// DefaultRetainSucceeded is how long succeeded jobs are kept before the
	// cleaner deletes them: long enough to look at yesterday's work, short
	// enough that the table does not grow by a day's throughput every day.
	DefaultRetainSucceeded = 24 * time.Hour
	// DefaultCleanInterval is how often a worker's cleaner looks for
	// succeeded jobs past their retention.
	DefaultCleanInterval = 30 * time.Second
)

// The heartbeat also tells the console the worker is alive, and the console
// calls a worker stale after dlq.WorkerStaleAfter (60 s) without one. So the
// default interval is a third of the lease but no more than 10 s, and no
// interval may exceed 20 s: a long lease (for long jobs) must not make a
// healthy worker look dead between beats.
const (
	maxDefaultHeartbeat = 10 * time.Second
	maxHeartbeat        = dlq.WorkerStaleAfter / 3
)

// Config tunes a Worker. Zero values take the defaults above.
type Config struct {
	// Registry holds the handlers this worker runs. Required. It is copied
	// by New: tasks registered afterwards are not seen.
	Registry *Registry
	// ID names this worker in leases, attempts and the workers table.
	// Default: host-pid-random, unique per process.
	ID string
	// Queues to claim from. Default: ["default"].
	Queues []string
	// Concurrency is how many jobs run at once. Default 100.
	Concurrency int
	// LeaseDuration is how long a claimed job stays this worker's without a
	// heartbeat; a crashed worker's jobs are redelivered after it. Default 30s.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often leases are renewed and the worker's
	// row refreshed; at most half the lease and at most 20 s. Default: a
	// third of LeaseDuration, at most 10 s.
	HeartbeatInterval time.Duration
	// PollInterval is how often an idle worker looks for due jobs. With
	// ListenDSN set it is only the fallback for missed notifications and for
	// retries coming due. Default 1s.
	PollInterval time.Duration
	// RestartGrace is how long after Postgres (re)starts, or after this
	// worker last failed to reach it, the rescuer leaves alone the leases
	// that lapsed meanwhile: no worker could renew them, and live ones
	// will. At least the heartbeat interval of every worker on the
	// database. Default 20s.
	RestartGrace time.Duration
	// RescueInterval is how often this worker looks for expired leases.
	// Default 15s.
	RescueInterval time.Duration
	// DefaultTimeout bounds a job whose task sets no TaskOptions.Timeout
	// and that was enqueued without a timeout of its own. Default 1m.
	DefaultTimeout time.Duration
	// MaxTimeout, when set, caps every attempt, whatever its task or the
	// job itself asks for: the operator's bound on how long a slot can be
	// held. 0: no cap, the task's or job's own timeout wins.
	MaxTimeout time.Duration
	// ShutdownGrace is how long in-flight jobs may keep running after Run's
	// context is cancelled before their contexts are cancelled. Default 20s.
	ShutdownGrace time.Duration
	// RetainSucceeded is how long a succeeded job is kept after it
	// finished; then the cleaner, which every worker runs (one at a time),
	// deletes it. Replays and dead jobs are never deleted by it: their
	// letters link to them. Negative keeps succeeded jobs for ever.
	// Default 24h.
	RetainSucceeded time.Duration
	// CleanInterval is how often the cleaner runs. Default 30s.
	CleanInterval time.Duration
	// TimingsInterval is how often the worker writes the per-task timings
	// it counted (one statement a flush). Default DefaultTimingsInterval.
	TimingsInterval time.Duration
	// RetryPolicy spaces the retries of transient failures.
	RetryPolicy RetryPolicy
	// Logger receives the worker's logs. Default: discard.
	Logger *slog.Logger
	// Version is the build of the code running the handlers, recorded in
	// every attempt so a dead letter says which release failed. Default: the
	// module version or VCS revision from the binary's build info.
	Version string
	// ListenDSN, when set, opens a LISTEN connection so that idle workers
	// wake as soon as a job is enqueued. Empty: polling only.
	ListenDSN string
	// Metrics, when set, receives redrive_job_outcomes_total and
	// redrive_job_duration_seconds. Nil: not exported.
	Metrics prometheus.Registerer
	// NowFunc is the clock for attempt timestamps and durations. Default time.Now.
	NowFunc func() time.Time
}

// withDefaults fills every zero field.
func (c Config) withDefaults() Config {
	host := hostname()
	c.ID = cmp.Or(c.ID, fmt.Sprintf("%s-%d-%06x", host, os.Getpid(), rand.Uint32()&0xffffff))
	if len(c.Queues) == 0 {
		c.Queues = []string{dlq.DefaultQueue}
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.LeaseDuration = cmp.Or(c.LeaseDuration, DefaultLeaseDuration)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, min(c.LeaseDuration/3, maxDefaultHeartbeat))
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.RescueInterval = cmp.Or(c.RescueInterval, DefaultRescueInterval)
	c.RestartGrace = cmp.Or(c.RestartGrace, DefaultRestartGrace)
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, DefaultTimeout)
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, DefaultShutdownGrace)
	c.RetainSucceeded = cmp.Or(c.RetainSucceeded, DefaultRetainSucceeded)
	c.CleanInterval = cmp.Or(c.CleanInterval, DefaultCleanInterval)
	c.TimingsInterval = cmp.Or(c.TimingsInterval, DefaultTimingsInterval)
	c.RetryPolicy = c.RetryPolicy.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Version = cmp.Or(c.Version, buildVersion())
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

// validate reports every problem at once, so a misconfigured worker fails
// at start with the whole list rather than one fix at a time.
func (c Config) validate() error {
	var errs []error
	switch {
	case c.Registry == nil:
		errs = append(errs, errors.New("Registry is required"))
	case len(c.Registry.tasks) == 0:
		// Refused rather than run: such a worker would dead-letter every
		// job it claims as UnknownTask.
		errs = append(errs, errors.New("Registry has no tasks: register at least one handler"))
	}
	if len(c.ID) > 200 {
		errs = append(errs, errors.New("ID must be at most 200 bytes"))
	}
	for _, q := range c.Queues {
		if msg := dlq.QueueNameProblem(q); msg != "" {
			errs = append(errs, fmt.Errorf("queue %q: %s", q, msg))
		}
	}
	if c.Concurrency < 1 || c.Concurrency > 10_000 {
		//lint:ignore ST1005 the message starts with the Config field it is about
		errs = append(errs, fmt.Errorf("Concurrency %d: must be between 1 and 10000", c.Concurrency))
	}
	for name, d := range map[string]time.Duration{
		"LeaseDuration": c.LeaseDuration, "HeartbeatInterval": c.HeartbeatInterval,
		"PollInterval": c.PollInterval, "RescueInterval": c.RescueInterval, "RestartGrace": c.RestartGrace,
		"DefaultTimeout": c.DefaultTimeout, "MaxTimeout": c.MaxTimeout, "ShutdownGrace": c.ShutdownGrace,
		"CleanInterval": c.CleanInterval, "TimingsInterval": c.TimingsInterval,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %s: must not be negative", name, d))
		}
	}
	// A lease must survive one late or failed heartbeat, or a busy worker
	// would lose jobs it is still running.
	if c.HeartbeatInterval > maxHeartbeat {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %s: must be at most %s, or the console shows the worker stale between beats",
			c.HeartbeatInterval, maxHeartbeat))
	}
	if c.HeartbeatInterval*2 > c.LeaseDuration {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %s: must be at most half of LeaseDuration %s",
			c.HeartbeatInterval, c.LeaseDuration))
	}
	if err := c.RetryPolicy.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Registry != nil {
		// A schedule of a task this worker cannot run would enqueue jobs
		// that wait for a worker that may never come.
		for _, s := range c.Registry.scheduleSnapshot() {
			if _, ok := c.Registry.tasks[s.def.Task]; !ok {
				errs = append(errs, fmt.Errorf("schedule %q: task %q is not registered: register its handler on the same Registry", s.def.Name, s.def.Task))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	return nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown-host"
	}
	return h
}

// buildVersion reads the running binary's version from its build info: the
// module version when installed from a tag, else the VCS revision.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return rev + dirty
}
