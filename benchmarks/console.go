package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// consolePage is a page of the console timed on the seeded letters.
type consolePage struct {
	name, label string
	// path builds the URL path from the letter picked for the detail page.
	path func(letterID int64) string
}

// consolePages are the pages the table times: what an on-call engineer
// opens first. The search is the existing page benchmark's common one.
func consolePages() []consolePage {
	return []consolePage{
		{"list", "Dead-letter list", func(int64) string { return "/dead-letters" }},
		{"detail", "Dead-letter detail", func(id int64) string { return fmt.Sprintf("/dead-letters/%d", id) }},
		{"search", "Free-text search", func(int64) string { return "/dead-letters?q=connection+refused&status=all" }},
		{"overview", "Overview", func(int64) string { return "/" }},
		{"groups", "Error groups", func(int64) string { return "/groups" }},
	}
}

// benchUser signs the harness in to the console; it is an operator so it
// may run the bulk actions too.
const (
	benchUser     = "bench"
	benchPassword = "benchmark-only-password"
)

// console measures the console's side on one freshly seeded database:
// the seed itself, the database's size, page latency, memory under
// concurrent readers, then bulk replay and discard by filter. It drives
// the `redrive` binary (seed, user, token, serve) and the HTTP API, as an
// operator would.
func (s *suite) console(ctx context.Context, round int) error {
	r := redriveEngine{}
	return s.c.withDB(ctx, "redrive_console", s.templates[r.Name()].base, func(name string) error {
		dsn := s.c.dsn(name)
		if err := s.seed(ctx, dsn, round); err != nil {
			return err
		}
		if err := s.c.vacuum(ctx, name); err != nil {
			return err
		}
		db, err := s.c.observe(ctx, name)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := s.size(ctx, db, round); err != nil {
			return err
		}
		srv, err := s.serve(ctx, dsn)
		if err != nil {
			return err
		}
		defer srv.close()
		return errors.Join(s.pages(ctx, srv, db, round), s.readers(ctx, srv, db, round), s.bulk(ctx, srv, db, round))
	})
}

// detailLetter picks the letter the detail page shows: one half way down.
func detailLetter(ctx context.Context, db *pgxpool.Pool, letters int) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `SELECT id FROM dead_letters ORDER BY id DESC LIMIT 1 OFFSET $1`, letters/2).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("pick a letter: %w", err)
	}
	return id, nil
}

// pages times each console page PageRequests times, one request at a
// time, after one untimed warm-up request.
func (s *suite) pages(ctx context.Context, srv *server, db *pgxpool.Pool, round int) error {
	r := redriveEngine{}
	id, err := detailLetter(ctx, db, s.sizes.Letters)
	if err != nil {
		return err
	}
	var errs []error
	for _, pg := range consolePages() {
		took, err := timePage(ctx, srv, pg.path(id), s.sizes.PageRequests)
		if err != nil {
			s.failRecord(r, "page."+pg.name+".p50", "page."+pg.name+".p95")
			errs = append(errs, err)
			continue
		}
		ms := millis(took)
		s.record("page."+pg.name+".p50", r, round, quantile(ms, 0.50))
		s.record("page."+pg.name+".p95", r, round, quantile(ms, 0.95))
	}
	return errors.Join(errs...)
}

func timePage(ctx context.Context, srv *server, path string, n int) ([]time.Duration, error) {
	if err := srv.get(ctx, path); err != nil {
		return nil, err
	}
	took := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := srv.get(ctx, path); err != nil {
			return nil, err
		}
		took = append(took, time.Since(t0))
	}
	return took, nil
}

// readers has Readers clients read the console pages round-robin for
// ReadFor while the server's resident memory is sampled every 100 ms.
func (s *suite) readers(ctx context.Context, srv *server, db *pgxpool.Pool, round int) error {
	r := redriveEngine{}
	keys := []string{"rss.idle", "rss.peak", "readers.rate"}
	id, err := detailLetter(ctx, db, s.sizes.Letters)
	if err != nil {
		s.failRecord(r, keys...)
		return err
	}
	idle, err := rssMiB(srv.proc.pid())
	if err != nil {
		s.failRecord(r, keys...)
		return err
	}
	// Readers start no request after the deadline but finish the one they
	// are in: a cancelled request would be an error in the server's log,
	// not a page served.
	start := time.Now()
	deadline := start.Add(s.sizes.ReadFor)
	var served atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	pages := consolePages()
	for i := range s.sizes.Readers {
		wg.Go(func() {
			for j := i; time.Now().Before(deadline) && ctx.Err() == nil; j++ {
				if err := srv.get(ctx, pages[j%len(pages)].path(id)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				served.Add(1)
			}
		})
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	peakCh := make(chan rssPeak, 1)
	go func() {
		peak, err := peakRSS(sampleCtx, srv.proc.pid())
		peakCh <- rssPeak{peak, err}
	}()
	wg.Wait()
	took := time.Since(start)
	stopSampling()
	peak := <-peakCh
	if err := errors.Join(firstErr, peak.err); err != nil {
		s.failRecord(r, keys...)
		return fmt.Errorf("concurrent readers: %w", err)
	}
	s.record("rss.idle", r, round, idle)
	s.record("rss.peak", r, round, max(peak.mib, idle))
	s.record("readers.rate", r, round, perSecond(int(served.Load()), took))
	return nil
}

// rssPeak is the result of peakRSS.
type rssPeak struct {
	mib float64
	err error
}

// peakRSS samples a process's resident memory until ctx ends.
func peakRSS(ctx context.Context, pid int) (float64, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var peak float64
	for {
		select {
		case <-ctx.Done():
			return peak, nil
		case <-tick.C:
		}
		v, err := rssMiB(pid)
		if err != nil {
			return 0, err
		}
		peak = max(peak, v)
	}
}

// rssMiB reads VmRSS of a process from /proc.
func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for process %d", pid)
}
