package web

import (
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/reads"
	"github.com/redrive/redrive/store/postgres"
)

// readStore is the store the console's heavy reads go to — lists, search,
// error groups, the overview, exports, the jobs and workers pages, and the
// API's lists of letters, groups and audit entries — and the middleware
// that lets those pages say how fresh they are and gives every such answer
// the headers ReadSourceHeader and ReadLagHeader, for scripts and the
// remote CLI. Without a replica it is the primary's store and the
// middleware does nothing.
//
// Everything else stays on the primary: actions and the pages they lead
// to (a letter, a job, an operation, an audit entry read back what was just
// written), confirmation counts, sign-in, sessions, the throttle, /readyz
// (a replica that is down must not take the console out of rotation) and
// the domain metrics (read from small summary tables).
func readStore(cfg Config, masker mask.Policy, primary *reads.Masked) (*reads.Masked, echo.MiddlewareFunc) {
	if cfg.Replica == nil {
		return primary, func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	return openStores(cfg.Replica.DB()).masked(masker), func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			s := cfg.Replica.State()
			handlers.SetReadState(c, s)
			h := c.Response().Header()
			if s.OnReplica {
				h.Set(ReadSourceHeader, "replica")
			} else {
				h.Set(ReadSourceHeader, "primary")
			}
			if s.OnReplica && s.Measured {
				h.Set(ReadLagHeader, strconv.FormatFloat(s.Lag.Seconds(), 'f', 3, 64))
			}
			return next(c)
		}
	}
}

// The headers of an answer read through readStore while a replica is
// configured: where it was read ("replica", or "primary" when the replica
// lags beyond the bound or is down), and the replica's lag in seconds at
// its last measure.
const (
	ReadSourceHeader = "Redrive-Read-Source"
	ReadLagHeader    = "Redrive-Read-Lag-Seconds"
)

// replicaCollector exports where the console's reads go and how far the
// replica lags, as of its last measure.
type replicaCollector struct {
	replica *postgres.Replica
	lag     *prometheus.Desc
	inUse   *prometheus.Desc
	maxLag  *prometheus.Desc
}

func newReplicaCollector(r *postgres.Replica) *replicaCollector {
	return &replicaCollector{
		replica: r,
		lag: prometheus.NewDesc("redrive_read_replica_lag_seconds",
			"How far the read replica's replay is behind the primary's WAL, at its last measure (absent while it cannot be reached).", nil, nil),
		inUse: prometheus.NewDesc("redrive_read_replica_in_use",
			"1 while the console's heavy reads go to the read replica, 0 while they fall back to the primary (the replica lags beyond the bound or is down).", nil, nil),
		maxLag: prometheus.NewDesc("redrive_read_replica_max_lag_seconds",
			"The lag beyond which the console's reads fall back to the primary.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (r *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.lag
	ch <- r.inUse
	ch <- r.maxLag
}

// Collect implements prometheus.Collector.
func (r *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	s := r.replica.State()
	inUse := 0.0
	if s.OnReplica {
		inUse = 1
	}
	ch <- prometheus.MustNewConstMetric(r.inUse, prometheus.GaugeValue, inUse)
	ch <- prometheus.MustNewConstMetric(r.maxLag, prometheus.GaugeValue, r.replica.MaxLag().Seconds())
	if s.Measured {
		ch <- prometheus.MustNewConstMetric(r.lag, prometheus.GaugeValue, s.Lag.Seconds())
	}
}
