package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

func TestMetricsCountOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
		if job.Attempt == 1 {
			return errors.New("first try fails")
		}
		return nil
	}, worker.TaskOptions{})
	reg := prometheus.NewRegistry()
	cfg := b.config("metrics-worker")
	cfg.Metrics = reg
	b.start(t, cfg)
	id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Queue: "default"})
	b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)

	for outcome, want := range map[string]float64{"retried": 1, "succeeded": 1} {
		waitFor(t, 5*time.Second, outcome+" counted", func() bool {
			c, err := outcomeCounter(reg, outcome)
			return err == nil && c == want
		})
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "redrive_job_duration_seconds" && len(mf.GetMetric()) != 2 {
			t.Fatalf("%d duration series, want one per outcome (2)", len(mf.GetMetric()))
		}
	}
}

func outcomeCounter(reg *prometheus.Registry, outcome string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != "redrive_job_outcomes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue(), nil
				}
			}
		}
	}
	return 0, nil
}
