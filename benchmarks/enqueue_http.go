package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// enqueueHTTP measures batch enqueue through Redrive's HTTP API, POST
// /api/v1/jobs/batch, with the bench user's token, one request at a time,
// EnqueueBatch jobs per request: what a producer in another language gets.
// River has no HTTP API, so this figure has no ratio.
func (s *suite) enqueueHTTP(ctx context.Context, e engine, round int) error {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	return s.c.withDB(ctx, "redrive_enqueue_http", s.templates[e.Name()].base, func(name string) error {
		srv, err := s.serve(ctx, s.c.dsn(name))
		if err != nil {
			s.failRecord(e, "enqueue.http")
			return err
		}
		defer srv.close()
		if err := s.c.quiesce(ctx); err != nil {
			s.failRecord(e, "enqueue.http")
			return err
		}
		bodies := map[int]string{}
		start := time.Now()
		for done := 0; done < s.sizes.EnqueueJobs; {
			n := min(s.sizes.EnqueueBatch, s.sizes.EnqueueJobs-done)
			if bodies[n] == "" {
				bodies[n] = `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"task":"`+redriveNoop+`"},`, n), ",") + `]}`
			}
			code, body, err := srv.do(ctx, http.MethodPost, "/api/v1/jobs/batch", bodies[n])
			if err == nil && code != http.StatusCreated {
				err = fmt.Errorf("POST /api/v1/jobs/batch: %d %.200s", code, body)
			}
			if err != nil {
				s.failRecord(e, "enqueue.http")
				return err
			}
			done += n
		}
		s.record("enqueue.http", e, round, perSecond(s.sizes.EnqueueJobs, time.Since(start)))
		return nil
	})
}
