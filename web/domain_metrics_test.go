package web

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redrive/redrive/dlq"
)

type fakeStats struct {
	snap dlq.MetricsSnapshot
	err  error
	// deadline is how long the collector gave the read.
	deadline time.Duration
}

func (f *fakeStats) MetricsSnapshot(ctx context.Context) (dlq.MetricsSnapshot, error) {
	if d, ok := ctx.Deadline(); ok {
		f.deadline = time.Until(d)
	}
	return f.snap, f.err
}

// gather registers c on a pedantic registry (which checks the metrics are
// consistent with their descriptions) and returns every sample by name and
// labels: "name,label=value,...".
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
			if c := m.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
		}
	}
	return got
}

func TestDomainCollector(t *testing.T) {
	t.Parallel()

	t.Run("ExportsTheSnapshot", func(t *testing.T) {
		t.Parallel()
		src := &fakeStats{snap: dlq.MetricsSnapshot{
			DeadLetters: []dlq.DeadLetterCount{{Task: "a", Queue: "q", Status: dlq.StatusPending, N: 5}},
			Jobs:        []dlq.JobCount{{Queue: "q", State: dlq.StateRetrying, N: 2}},
			Workers: []dlq.WorkerStatus{
				{WorkerInfo: dlq.WorkerInfo{ID: "w1"}, HeartbeatAge: 2 * time.Second},
				{WorkerInfo: dlq.WorkerInfo{ID: "w2"}, HeartbeatAge: 5 * time.Minute},
			},
			Succeeded: dlq.SucceededKept{Estimate: 1234},
		}}
		got := gather(t, newDomainCollector(src, slog.New(slog.DiscardHandler)))
		want := map[string]float64{
			"redrive_domain_up": 1,
			"redrive_dead_letters,queue=q,status=pending,task=a": 5,
			"redrive_jobs,queue=q,state=retrying":                2,
			"redrive_workers,state=live":                         1,
			"redrive_workers,state=stale":                        1,
			"redrive_worker_heartbeat_age_seconds,worker=w1":     2,
			"redrive_worker_heartbeat_age_seconds,worker=w2":     300,
			"redrive_jobs_succeeded_kept":                        1234,
			"redrive_jobs_succeeded_oldest_age_seconds":          0,
		}
		if len(got) != len(want) {
			t.Errorf("got %d samples, want %d: %v", len(got), len(want), got)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
		if src.deadline <= 0 || src.deadline > domainScrapeTimeout {
			t.Errorf("the read ran with %s left, want a deadline of at most %s", src.deadline, domainScrapeTimeout)
		}
	})

	t.Run("AFailedReadIsUpZeroNotAFailedScrape", func(t *testing.T) {
		t.Parallel()
		got := gather(t, newDomainCollector(&fakeStats{err: errors.New("database down")}, slog.New(slog.DiscardHandler)))
		if len(got) != 1 || got["redrive_domain_up"] != 0 {
			t.Errorf("got %v, want only redrive_domain_up 0", got)
		}
	})
}
