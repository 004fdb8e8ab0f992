package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// latency measures enqueue-to-start on an idle worker in this process,
// with LISTEN/NOTIFY on, at the engine's default settings.
func (s *suite) latency(ctx context.Context, e engine, round int) error {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	return s.c.withDB(ctx, strings.ToLower(e.Name())+"_latency", s.templates[e.Name()].base, func(name string) error {
		took, err := e.Latency(ctx, s.c.dsn(name), s.sizes.LatencySamples, s.sizes.LatencyGap)
		if err != nil {
			s.failRecord(e, "latency.p50", "latency.p95")
			return err
		}
		ms := millis(took)
		s.record("latency.p50", e, round, quantile(ms, 0.50))
		s.record("latency.p95", e, round, quantile(ms, 0.95))
		return nil
	})
}

// latencyStartTimeout bounds how long one latency job may take to start;
// a job that takes longer means the worker is not listening.
const latencyStartTimeout = 10 * time.Second

// latencyLoop runs a worker (run) in this process, lets it settle, then
// enqueues samples jobs one at a time and times each from the call to
// enqueue to its handler sending on started. One warm-up job goes first
// and is not counted: connections, prepared plans and the LISTEN
// connection are then in place, as on a worker that has been up a while.
func latencyLoop(ctx context.Context, run func(context.Context) error, samples int, gap time.Duration,
	started <-chan time.Time, enqueue func(context.Context) error) ([]time.Duration, error) {
	workCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(workCtx) }()
	took, err := sampleLatency(ctx, samples, gap, started, enqueue)
	stop()
	if werr := <-done; werr != nil && !errors.Is(werr, context.Canceled) {
		err = errors.Join(err, fmt.Errorf("latency worker: %w", werr))
	}
	return took, err
}

func sampleLatency(ctx context.Context, samples int, gap time.Duration, started <-chan time.Time,
	enqueue func(context.Context) error) ([]time.Duration, error) {
	// The worker registers and opens its LISTEN connection as it starts.
	if err := pause(ctx, time.Second); err != nil {
		return nil, err
	}
	took := make([]time.Duration, 0, samples)
	for i := -1; i < samples; i++ {
		t0 := time.Now()
		if err := enqueue(ctx); err != nil {
			return nil, fmt.Errorf("enqueue latency job: %w", err)
		}
		at, err := waitStart(ctx, started, latencyStartTimeout)
		if err != nil {
			return nil, fmt.Errorf("latency job %d: %w", i+1, err)
		}
		if i >= 0 {
			took = append(took, at.Sub(t0))
		}
		// Idle again before the next: the figure is a quiet worker's.
		if err := pause(ctx, gap); err != nil {
			return nil, err
		}
	}
	return took, nil
}
