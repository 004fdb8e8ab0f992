package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
)

// DefaultRate is the producer's default pace: enough that the console moves
// without burying the dead letters among thousands of successes.
const DefaultRate = 2.0

// maxRate bounds the pace; one enqueue per tick gets no faster than this.
const maxRate = 500.0

// ProducerConfig tunes a Producer. Zero values take defaults.
type ProducerConfig struct {
	// Store is where jobs are enqueued. Required.
	Store *queue.Store
	// Rate is jobs per second. Default 2, at most 500.
	Rate float64
	// Logger receives the producer's logs. Default: discard.
	Logger *slog.Logger
	// Seed fixes the sequence of jobs, for tests. 0 picks a random one.
	Seed uint64
}

// Producer keeps a realistic mix of demo jobs flowing.
type Producer struct {
	cfg ProducerConfig
	mix *mix
}

// NewProducer returns a producer, validating cfg after filling defaults.
func NewProducer(cfg ProducerConfig) (*Producer, error) {
	if cfg.Store == nil {
		return nil, errors.New("demo producer: Store is required")
	}
	cfg.Rate = cmp.Or(cfg.Rate, DefaultRate)
	if cfg.Rate < 0 || cfg.Rate > maxRate {
		return nil, fmt.Errorf("demo producer: Rate %v: must be between 0 and %v jobs per second", cfg.Rate, maxRate)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Producer{cfg: cfg, mix: newMix(seed)}, nil
}

// Run enqueues jobs at the configured rate until ctx is cancelled, then
// returns nil. It registers the demo tasks first, so that it can enqueue
// before any worker has started. A failed enqueue is logged and skipped: a
// demo producer should ride out a database restart.
func (p *Producer) Run(ctx context.Context) error {
	if err := p.cfg.Store.RegisterTasks(ctx, TaskNames()); err != nil {
		return fmt.Errorf("demo producer: %w", err)
	}
	p.cfg.Logger.Info("demo producer started", "rate", p.cfg.Rate)
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.cfg.Rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.cfg.Logger.Info("demo producer stopped")
			return nil
		case <-tick.C:
		}
		params := p.mix.next()
		res, err := p.cfg.Store.Enqueue(ctx, params)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			p.cfg.Logger.Warn("demo enqueue failed", "task", params.Task, "err", err)
		case res.Existing:
			p.cfg.Logger.Debug("demo enqueue deduplicated by idempotency key", "key", params.IdempotencyKey, "job_id", res.Job.ID)
		}
	}
}

// kind is one entry of the mix: a weight out of the total and a builder.
type kind struct {
	weight int
	build  func(m *mix) dlq.EnqueueParams
}

// kinds returns the mix. About nine jobs in ten succeed (some after
// retries); the rest dead-letter in each of the ways the console
// distinguishes. max_attempts stays at 3-4 so that, with the default
// one-second backoff base, an exhausting job reaches the dead letters
// within seconds.
func kinds() []kind {
	return []kind{
		{285, (*mix).reindexOrder},         // demo.noop: succeeds
		{150, (*mix).sendEmail},            // demo.sleep: succeeds
		{150, (*mix).productEvent},         // demo.apply_product_event: succeeds, some stale or duplicate
		{150, (*mix).capturePaymentFlaky},  // demo.flaky: succeeds after 1-2 retries
		{95, (*mix).settlePayment},         // demo.sleep on payments: succeeds
		{20, (*mix).chargeDeclined},        // demo.permanent: PaymentDeclined
		{20, (*mix).invalidEmail},          // demo.permanent: ValidationError
		{25, (*mix).reserveStockOutage},    // demo.always_fail: exhausted
		{15, (*mix).capturePaymentFlakier}, // demo.flaky: fails more often than it may retry
		{10, (*mix).allocateShipment},      // demo.panic: panic
		{70, (*mix).chargeOrder},           // payments.charge: succeeds, dead-letters in the incident
		{10, (*mix).refundOrder},           // payments.refund: likewise
	}
}
