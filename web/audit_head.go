package web

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
)

// The audit chain cannot prove where it ends (store/audit/audit_head.go): someone
// who bypasses the append-only triggers can cut off its newest entries and
// leave a shorter chain that verifies. So the console publishes the head
// where that person cannot reach it: in its log, every few minutes, and on
// /metrics as redrive_audit_head_id. A log store or Prometheus then keeps
// copies that `redrive audit verify --expect-head ID:HASH` checks the trail
// against.

// AuditHeadSource reads the newest entry of the audit trail (store/audit).
type AuditHeadSource interface {
	AuditHead(ctx context.Context) (dlq.AuditHead, error)
}

// DefaultAuditHeadEvery is how often the console logs the audit head: a
// truncation goes unnoticed at most this long after the last entry it
// removed was logged.
const DefaultAuditHeadEvery = 5 * time.Minute

// auditHeadReadTimeout bounds one read of the head (a probe of the
// primary key).
const auditHeadReadTimeout = 5 * time.Second

// AuditHeadLogConfig configures LogAuditHead.
type AuditHeadLogConfig struct {
	Source AuditHeadSource
	Logger *slog.Logger
	// Every is the interval between log lines; default DefaultAuditHeadEvery.
	Every time.Duration
}

// LogAuditHead logs the audit head at info level ("audit head", with
// head=ID:HASH) once at start and then every cfg.Every, until ctx ends; it
// then returns nil. It logs even when the head has not moved, so a log
// store that keeps only recent days still holds a copy. A failed read is
// logged as an error and tried again at the next tick.
func LogAuditHead(ctx context.Context, cfg AuditHeadLogConfig) error {
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	tick := time.NewTicker(cmp.Or(cfg.Every, DefaultAuditHeadEvery))
	defer tick.Stop()
	for {
		logAuditHead(ctx, cfg.Source, logger)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func logAuditHead(ctx context.Context, src AuditHeadSource, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, auditHeadReadTimeout)
	defer cancel()
	h, err := src.AuditHead(ctx)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		// Shutting down: not worth an error line.
	case err != nil:
		logger.Error("audit head: read failed", "err", err)
	case h.ID == 0:
		logger.Info("audit head", "head", "none", "audit_head_id", 0)
	default:
		logger.Info("audit head", "head", h.String(), "audit_head_id", h.ID, "audit_head_hash", h.Hash)
	}
}

// auditHeadCollector exports the id of the newest audit entry, read at
// scrape time. Only the id: a hash as a label would make a new series with
// every entry. max_over_time of the series is the highest head ever seen,
// which the trail must still hold.
type auditHeadCollector struct {
	src    AuditHeadSource
	logger *slog.Logger
	headID *prometheus.Desc
}

func newAuditHeadCollector(src AuditHeadSource, logger *slog.Logger) *auditHeadCollector {
	return &auditHeadCollector{src: src, logger: logger,
		headID: prometheus.NewDesc("redrive_audit_head_id",
			"Id of the newest audit entry (0: the trail is empty). It never goes down; if it does, or the trail lacks an id it once had "+
				"(redrive audit verify --expect-head ID), entries were removed from the trail's end.", nil, nil)}
}

// Describe implements prometheus.Collector.
func (a *auditHeadCollector) Describe(ch chan<- *prometheus.Desc) { ch <- a.headID }

// Collect implements prometheus.Collector. A failed read leaves the series
// out of this scrape (redrive_domain_up says whether the database answers).
func (a *auditHeadCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), domainScrapeTimeout)
	defer cancel()
	h, err := a.src.AuditHead(ctx)
	if err != nil {
		a.logger.Error("metrics: read audit head", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(a.headID, prometheus.GaugeValue, float64(h.ID))
}
