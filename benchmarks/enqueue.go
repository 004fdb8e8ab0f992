package main

import (
	"context"
	"strings"
	"time"
)

// enqueue measures batch enqueue through the engine's Go API into an
// empty queue.
func (s *suite) enqueue(ctx context.Context, e engine, round int) error {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	return s.c.withDB(ctx, strings.ToLower(e.Name())+"_enqueue", s.templates[e.Name()].base, func(name string) error {
		if err := s.c.quiesce(ctx); err != nil {
			s.failRecord(e, "enqueue")
			return err
		}
		start := time.Now()
		if err := e.Enqueue(ctx, s.c.dsn(name), kindNoop, s.sizes.EnqueueJobs, s.sizes.EnqueueBatch); err != nil {
			s.failRecord(e, "enqueue")
			return err
		}
		s.record("enqueue", e, round, perSecond(s.sizes.EnqueueJobs, time.Since(start)))
		return nil
	})
}
