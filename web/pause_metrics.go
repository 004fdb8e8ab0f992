package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
)

// PauseSource reads what the pause metrics export.
type PauseSource interface {
	OpenPauses(ctx context.Context) ([]dlq.Pause, bool, error)
	QueueWaits(ctx context.Context) ([]dlq.QueueWait, error)
}

// pauseCollector exports the open pauses and how long each queue's oldest
// due job has waited, read at scrape time, so an alert can fire on a pause
// left on (redrive_paused for an hour) or on work nobody takes
// (redrive_queue_oldest_waiting_seconds), paused or not.
type pauseCollector struct {
	src    PauseSource
	logger *slog.Logger
	paused *prometheus.Desc
	oldest *prometheus.Desc
}

func newPauseCollector(src PauseSource, logger *slog.Logger) *pauseCollector {
	return &pauseCollector{src: src, logger: logger,
		paused: prometheus.NewDesc("redrive_paused",
			"1 for each queue (kind=\"queue\") or task (kind=\"task\") an open pause holds; absent when nothing is paused.",
			[]string{"kind", "name"}, nil),
		oldest: prometheus.NewDesc("redrive_queue_oldest_waiting_seconds",
			"Seconds the oldest due job of each queue has been waiting to be claimed (since its run_at), paused work included.",
			[]string{"queue"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (p *pauseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- p.paused
	ch <- p.oldest
}

// Collect implements prometheus.Collector. A failed read is logged and its
// series left out; redrive_domain_up reports the database's reachability.
func (p *pauseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), domainScrapeTimeout)
	defer cancel()
	open, _, err := p.src.OpenPauses(ctx)
	if err != nil {
		p.logger.Error("metrics: read pauses", "err", err)
	}
	for _, o := range open {
		ch <- prometheus.MustNewConstMetric(p.paused, prometheus.GaugeValue, 1, o.Kind, o.Name)
	}
	waits, err := p.src.QueueWaits(ctx)
	if err != nil {
		p.logger.Error("metrics: read queue waits", "err", err)
	}
	now := time.Now()
	for _, w := range waits {
		ch <- prometheus.MustNewConstMetric(p.oldest, prometheus.GaugeValue, max(0, now.Sub(w.Oldest).Seconds()), w.Queue)
	}
}
