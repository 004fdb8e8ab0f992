package worker

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics counts job outcomes and times attempts. They live in the worker
// process (the console only sees the database), so `redrive worker` serves
// them on --metrics-addr and `redrive dev` on the console's /metrics.
type metrics struct {
	outcomes *prometheus.CounterVec
	duration *prometheus.HistogramVec
	cleaned  prometheus.Counter
}

// Outcome labels of redrive_job_outcomes_total.
const (
	outcomeSucceeded  = "succeeded"
	outcomeRetried    = "retried"
	outcomeDead       = "dead_lettered"
	outcomeHandedBack = "handed_back"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redrive_job_outcomes_total",
			Help: "Attempts by task, queue and outcome (succeeded, retried, dead_lettered, handed_back).",
		}, []string{"task", "queue", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "redrive_job_duration_seconds",
			Help:    "Time a handler ran for one attempt, by task and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 9), // 5 ms .. ~5.5 min
		}, []string{"task", "outcome"}),
		cleaned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "redrive_jobs_cleaned_total",
			Help: "Succeeded jobs this worker's cleaner deleted past their retention.",
		}),
	}
	if reg == nil {
		return m, nil // counted but not exported
	}
	for _, c := range []prometheus.Collector{m.outcomes, m.duration, m.cleaned} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("worker: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(task, queue, outcome string, durationMS int64) {
	m.outcomes.WithLabelValues(task, queue, outcome).Inc()
	m.duration.WithLabelValues(task, outcome).Observe(float64(durationMS) / 1000)
}

// tally folds a batch of outcomes into the metrics. A batch is mostly one
// task, queue and outcome after another, so it looks the labels up once
// per run of equal labels, not twice per job, and adds each run's count
// at once. flush must be called at the end.
type tally struct {
	m                    *metrics
	task, queue, outcome string
	n                    int
	duration             prometheus.Observer
}

func (t *tally) observe(task, queue, outcome string, durationMS int64) {
	if t.n == 0 || task != t.task || queue != t.queue || outcome != t.outcome {
		t.flush()
		if t.duration == nil || task != t.task || outcome != t.outcome {
			t.duration = t.m.duration.WithLabelValues(task, outcome)
		}
		t.task, t.queue, t.outcome = task, queue, outcome
	}
	t.n++
	t.duration.Observe(float64(durationMS) / 1000)
}

func (t *tally) flush() {
	if t.n > 0 {
		t.m.outcomes.WithLabelValues(t.task, t.queue, t.outcome).Add(float64(t.n))
		t.n = 0
	}
}
