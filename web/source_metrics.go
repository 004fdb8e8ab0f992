package web

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
)

// SourceHealthSource reads what the source metrics export.
type SourceHealthSource interface {
	SourceHealth(ctx context.Context) ([]dlq.Source, error)
}

// sourceCollector exports each source's letters brought in and, for a
// source Redrive imports from (River), how long ago it was last read to
// the end and whether its import is failing, read at scrape time: an alert
// can fire on an import that stopped (redrive_source_import_failing 1, or a
// check older than a few minutes) before anyone misses a letter. A source
// that runs replays itself also has the replays waiting to be sent to it.
type sourceCollector struct {
	src      SourceHealthSource
	logger   *slog.Logger
	imported *prometheus.Desc
	checked  *prometheus.Desc
	failing  *prometheus.Desc
	waiting  *prometheus.Desc
}

func newSourceCollector(src SourceHealthSource, logger *slog.Logger) *sourceCollector {
	return &sourceCollector{src: src, logger: logger,
		imported: prometheus.NewDesc("redrive_source_letters_imported_total",
			"Letters each source other than Redrive's own queue has brought in (sent over HTTP, or imported from River), by source and kind.",
			[]string{"source", "kind"}, nil),
		checked: prometheus.NewDesc("redrive_source_check_age_seconds",
			"Seconds since the console last read an importing source (River) to the end; absent before its first read.",
			[]string{"source"}, nil),
		failing: prometheus.NewDesc("redrive_source_import_failing",
			"1 while an importing source's last import failed (the sources page says why; the import backs off and tries again), else 0.",
			[]string{"source"}, nil),
		waiting: prometheus.NewDesc("redrive_source_replays_waiting",
			"Replays queued for a source that runs them itself (River, an HTTP source's replay endpoint) and not sent yet: due ones are sent within a second, so a count that stays up says the source is not taking them (the sources page says why).",
			[]string{"source"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (s *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.imported
	ch <- s.checked
	ch <- s.failing
	ch <- s.waiting
}

// Collect implements prometheus.Collector. A failed read is logged and its
// series left out; redrive_domain_up reports the database's reachability.
func (s *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), domainScrapeTimeout)
	defer cancel()
	srcs, err := s.src.SourceHealth(ctx)
	if err != nil {
		s.logger.Error("metrics: read sources", "err", err)
		return
	}
	now := time.Now()
	for _, src := range srcs {
		if src.Kind == dlq.SourceKindRedrive {
			continue
		}
		ch <- prometheus.MustNewConstMetric(s.imported, prometheus.CounterValue, float64(src.Imported), src.Name, string(src.Kind))
		if src.Kind == dlq.SourceKindRiver || src.ReplayURL != nil {
			ch <- prometheus.MustNewConstMetric(s.waiting, prometheus.GaugeValue, float64(src.ReplaysWaiting), src.Name)
		}
		if src.Kind != dlq.SourceKindRiver {
			continue
		}
		if src.CheckedAt != nil {
			ch <- prometheus.MustNewConstMetric(s.checked, prometheus.GaugeValue, max(0, now.Sub(*src.CheckedAt).Seconds()), src.Name)
		}
		failing := 0.0
		if src.LastError != nil {
			failing = 1
		}
		ch <- prometheus.MustNewConstMetric(s.failing, prometheus.GaugeValue, failing, src.Name)
	}
}
