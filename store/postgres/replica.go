package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
)

// ReplicaConfig configures the console's reads from a streaming replica.
type ReplicaConfig struct {
	// ReplicaURL connects to the streaming replica (REDRIVE_READ_DATABASE_URL).
	ReplicaURL string
	// PrimaryURL connects to the primary, where the reads go while the
	// replica lags or is down: the URL of Primary (DATABASE_URL).
	PrimaryURL string
	// Primary is the primary's handle; the replica's lag is measured
	// against the primary's WAL position read through it.
	Primary *sqlx.DB
	// MaxLag is how far behind the replica may be before reads go to the
	// primary; default 30 s.
	MaxLag time.Duration
	// Interval between two measures of the lag; default 1 s.
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock the lag is measured by; default time.Now.
	Now func() time.Time
}

// Replica serves the console's heavy reads from a streaming replica while
// it keeps up, and from the primary while it lags beyond MaxLag, cannot be
// reached or is no longer a replica; it goes back to the replica once the
// replica has caught up. Run measures the lag; DB is the read handle.
//
// The choice is made where connections are taken from the read handle's
// pool, not per query: a connection opened to one database is dropped from
// the pool as soon as reads move to the other. A request already running
// when reads move finishes where it started.
type Replica struct {
	cfg       ReplicaConfig
	check     *sqlx.DB    // to the replica, for measuring its lag
	reads     *sqlx.DB    // the read pool, routed
	onReplica atomic.Bool // where new read connections go
	state     atomic.Pointer[dlq.ReadState]

	mu      sync.Mutex // serialises measures: Open's, then Run's
	samples walSamples
}

// OpenReplica prepares reads from cfg.ReplicaURL and measures the replica
// once. A replica that cannot be reached is not an error: reads start on
// the primary and move to the replica when it answers. A malformed URL is.
func OpenReplica(ctx context.Context, cfg ReplicaConfig) (*Replica, error) {
	if cfg.ReplicaURL == "" || cfg.PrimaryURL == "" || cfg.Primary == nil {
		return nil, errors.New("open read replica: ReplicaURL, PrimaryURL and Primary are required")
	}
	cfg.MaxLag = cmp.Or(cfg.MaxLag, 30*time.Second)
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	replica, err := newOneTripConnector(cfg.ReplicaURL)
	if err != nil {
		return nil, fmt.Errorf("read replica: %w", err)
	}
	primary, err := newOneTripConnector(cfg.PrimaryURL)
	if err != nil {
		return nil, fmt.Errorf("read replica: primary: %w", err)
	}
	r := &Replica{cfg: cfg}
	r.check = sqlx.NewDb(sql.OpenDB(replica), "postgres")
	r.check.SetMaxOpenConns(1)
	r.reads = sqlx.NewDb(sql.OpenDB(&routedConnector{replica: replica, primary: primary, toReplica: &r.onReplica}), "postgres")
	r.reads.SetMaxOpenConns(20)
	r.reads.SetMaxIdleConns(10)
	r.reads.SetConnMaxIdleTime(5 * time.Minute)
	r.measure(ctx)
	return r, nil
}

// DB is the read handle: the replica's data while it keeps up, the
// primary's otherwise. Only reads belong on it.
func (r *Replica) DB() *sqlx.DB { return r.reads }

// State says where reads go now, as of the last measure.
func (r *Replica) State() dlq.ReadState { return *r.state.Load() }

// MaxLag is the bound beyond which reads go to the primary.
func (r *Replica) MaxLag() time.Duration { return r.cfg.MaxLag }

// Run measures the replica's lag every Interval until ctx ends.
func (r *Replica) Run(ctx context.Context) error {
	tick := time.NewTicker(r.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.measure(ctx)
		}
	}
}

// Close closes the replica's connections and the read store's.
func (r *Replica) Close() error {
	return errors.Join(r.check.Close(), r.reads.Close())
}

const (
	// The primary's flushed WAL position: what a WAL sender can have sent.
	primaryWALSQL = `SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::bigint`
	// Whether the replica is one, and how far it has replayed. The replay
	// timestamp alone would not do: on an idle primary it grows without any
	// lag, as no commit comes to replay.
	replicaWALSQL = `SELECT pg_is_in_recovery(), coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint, 0)`
)

// measureTimeout bounds one measure: a replica that does not answer within
// it counts as one that cannot be reached.
const measureTimeout = 3 * time.Second

// measure reads the primary's WAL position, then the replica's, and moves
// the reads if need be. The primary is read first: a replica that has
// replayed that far was not behind when measured.
func (r *Replica) measure(parent context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(parent, measureTimeout)
	defer cancel()
	var obs observation
	obs.primaryErr = r.cfg.Primary.GetContext(ctx, &obs.primaryLSN, primaryWALSQL)
	obs.at = r.cfg.Now()
	row := r.check.QueryRowxContext(ctx, replicaWALSQL)
	obs.replicaErr = row.Scan(&obs.inRecovery, &obs.replayLSN)
	if parent.Err() != nil {
		return // shutting down: not the replica's fault
	}
	if obs.primaryErr == nil {
		r.samples.add(obs.primaryLSN, obs.at)
	}
	prev := r.state.Load()
	next := judge(obs, &r.samples, prev, r.cfg.MaxLag)
	r.state.Store(&next)
	r.onReplica.Store(next.OnReplica)
	r.logChange(prev, next, obs)
}

func (r *Replica) logChange(prev *dlq.ReadState, next dlq.ReadState, obs observation) {
	switch {
	case prev == nil && next.OnReplica:
		r.cfg.Logger.Info("console reads go to the read replica", "lag", next.Lag.String())
	case (prev == nil || prev.OnReplica) && !next.OnReplica:
		r.cfg.Logger.Warn("the read replica "+next.Problem+": console reads fall back to the primary",
			"replica_err", errString(obs.replicaErr), "primary_err", errString(obs.primaryErr))
	case prev != nil && !prev.OnReplica && next.OnReplica:
		r.cfg.Logger.Info("console reads are back on the read replica", "lag", next.Lag.String())
	case prev != nil && !prev.OnReplica && !next.OnReplica && prev.Measured != next.Measured:
		// Down, then up but behind (or the other way round): say so once,
		// not at every measure of a growing lag.
		r.cfg.Logger.Warn("the read replica "+next.Problem+": console reads stay on the primary",
			"replica_err", errString(obs.replicaErr))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// observation is one measure of the primary and the replica.
type observation struct {
	at         time.Time
	primaryLSN int64
	primaryErr error
	inRecovery bool
	replayLSN  int64
	replicaErr error
}

// judge decides where reads go after obs. Without the primary's position
// the lag cannot be told: reads stay where they were (the primary being
// down is not the replica's problem to solve).
func judge(obs observation, samples *walSamples, prev *dlq.ReadState, maxLag time.Duration) dlq.ReadState {
	s := dlq.ReadState{CheckedAt: obs.at}
	switch {
	case obs.replicaErr != nil:
		s.Problem = "cannot be reached"
	case !obs.inRecovery:
		s.Problem = "is not in recovery (no longer a replica)"
	case obs.primaryErr != nil:
		if prev == nil {
			s.Problem = "cannot be compared with the primary"
			return s
		}
		keep := *prev
		keep.CheckedAt = obs.at
		return keep
	default:
		s.Lag, s.Measured = samples.lag(obs.replayLSN, obs.at), true
		if s.Lag > maxLag {
			s.Problem = fmt.Sprintf("is %s behind (more than %s)", dlq.FormatLag(s.Lag), dlq.FormatLag(maxLag))
		} else {
			s.OnReplica = true
		}
	}
	return s
}

// walSamples remembers when the primary's WAL position was first seen at
// each value the replica has not replayed yet.
type walSamples struct {
	lsns []int64
	at   []time.Time
}

// maxWALSamples bounds the memory of a replica that never catches up: at
// one measure a second, an hour of positions, far beyond any MaxLag.
const maxWALSamples = 3600

func (w *walSamples) add(lsn int64, at time.Time) {
	if n := len(w.lsns); n > 0 && lsn <= w.lsns[n-1] {
		return // not new: keep the time it was first seen
	}
	if len(w.lsns) == maxWALSamples {
		w.lsns, w.at = w.lsns[1:], w.at[1:]
	}
	w.lsns, w.at = append(w.lsns, lsn), append(w.at, at)
}

// lag is how long ago the primary first stood at a position the replica
// has not replayed yet: the age of the oldest write the replica is missing
// (give or take one measure's interval); 0 when it has replayed all that
// was seen. Positions the replica has replayed are forgotten.
func (w *walSamples) lag(replayed int64, now time.Time) time.Duration {
	i := 0
	for i < len(w.lsns) && w.lsns[i] <= replayed {
		i++
	}
	w.lsns, w.at = w.lsns[i:], w.at[i:]
	if len(w.lsns) == 0 {
		return 0
	}
	return max(now.Sub(w.at[0]), 0)
}
