package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
)

// StatsSource reads the domain numbers /metrics exports.
type StatsSource interface {
	MetricsSnapshot(ctx context.Context) (dlq.MetricsSnapshot, error)
}

// domainScrapeTimeout bounds the queries of one scrape. Prometheus's own
// scrape timeout is usually 10 s; answering late is worse than answering
// redrive_domain_up 0.
const domainScrapeTimeout = 3 * time.Second

// domainCollector reads dead letters, jobs and workers from the store at
// scrape time, so the series are as fresh as the scrape and nothing has to
// keep gauges in step with the database. The reads use the summary tables
// and the small active-job index ranges, never a scan of dead_letters.
type domainCollector struct {
	src    StatsSource
	logger *slog.Logger

	up           *prometheus.Desc
	deadLetters  *prometheus.Desc
	jobs         *prometheus.Desc
	workers      *prometheus.Desc
	heartbeatAge *prometheus.Desc
	kept         *prometheus.Desc
	keptAge      *prometheus.Desc
}

func newDomainCollector(src StatsSource, logger *slog.Logger) *domainCollector {
	return &domainCollector{
		src:    src,
		logger: logger,
		up: prometheus.NewDesc("redrive_domain_up",
			"1 when the last scrape could read the domain numbers from the database, 0 when it failed or timed out.", nil, nil),
		deadLetters: prometheus.NewDesc("redrive_dead_letters",
			"Dead letters by task, queue and status (pending, replayed, discarded).", []string{"task", "queue", "status"}, nil),
		jobs: prometheus.NewDesc("redrive_jobs",
			"Jobs waiting or running, by queue and state (available, retrying, running). Finished jobs are not counted: see redrive_dead_letters.",
			[]string{"queue", "state"}, nil),
		workers: prometheus.NewDesc("redrive_workers",
			"Registered worker processes by state: live, or stale when the heartbeat is older than "+dlq.WorkerStaleAfter.String()+".",
			[]string{"state"}, nil),
		heartbeatAge: prometheus.NewDesc("redrive_worker_heartbeat_age_seconds",
			"Seconds since each registered worker's last heartbeat, by the database clock.", []string{"worker"}, nil),
		kept: prometheus.NewDesc("redrive_jobs_succeeded_kept",
			"Succeeded jobs kept until the workers' cleaner deletes them (Postgres's estimate, refreshed by autovacuum).", nil, nil),
		keptAge: prometheus.NewDesc("redrive_jobs_succeeded_oldest_age_seconds",
			"Age of the oldest succeeded job the cleaner may delete; past the retention, the cleaner is not keeping up (or no worker runs).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (d *domainCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- d.up
	ch <- d.deadLetters
	ch <- d.jobs
	ch <- d.workers
	ch <- d.heartbeatAge
	ch <- d.kept
	ch <- d.keptAge
}

// Collect implements prometheus.Collector. A failed read is logged and
// reported as redrive_domain_up 0 rather than failing the whole scrape,
// so the HTTP and Go runtime series still arrive when the database is down.
func (d *domainCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), domainScrapeTimeout)
	defer cancel()
	snap, err := d.src.MetricsSnapshot(ctx)
	if err != nil {
		d.logger.Error("metrics: read domain numbers", "err", err)
		ch <- prometheus.MustNewConstMetric(d.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(d.up, prometheus.GaugeValue, 1)
	for _, c := range snap.DeadLetters {
		ch <- prometheus.MustNewConstMetric(d.deadLetters, prometheus.GaugeValue, float64(c.N), c.Task, c.Queue, string(c.Status))
	}
	for _, c := range snap.Jobs {
		ch <- prometheus.MustNewConstMetric(d.jobs, prometheus.GaugeValue, float64(c.N), c.Queue, string(c.State))
	}
	var live, stale int
	for _, w := range snap.Workers {
		if w.Stale() {
			stale++
		} else {
			live++
		}
		ch <- prometheus.MustNewConstMetric(d.heartbeatAge, prometheus.GaugeValue, w.HeartbeatAge.Seconds(), w.ID)
	}
	ch <- prometheus.MustNewConstMetric(d.workers, prometheus.GaugeValue, float64(live), "live")
	ch <- prometheus.MustNewConstMetric(d.workers, prometheus.GaugeValue, float64(stale), "stale")
	ch <- prometheus.MustNewConstMetric(d.kept, prometheus.GaugeValue, float64(snap.Succeeded.Estimate))
	var oldest float64
	if !snap.Succeeded.Oldest.IsZero() {
		oldest = time.Since(snap.Succeeded.Oldest).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(d.keptAge, prometheus.GaugeValue, oldest)
}
