package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
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
	// api marks a JSON answer rather than a page: timed, but left out of
	// the concurrent readers' mix, which is what a browser loads.
	api bool
	// riverUI, when set, names River UI's answer to the same question
	// (riverUIList or riverUIDetail): the two are timed request by request,
	// alternating, and the table shows the ratio.
	riverUI string
}

// River UI's list is its job list of discarded jobs (River's dead letters),
// newest first, 50 per page; its detail is one job. Both are the JSON API
// its single-page UI calls: its HTML is a static shell, served once.
const (
	riverUIList   = "list"
	riverUIDetail = "detail"
)

// riverUIPath is the River UI request that answers question q, the detail
// showing job jobID.
func riverUIPath(q string, jobID int64) string {
	if q == riverUIList {
		return "/api/jobs?state=discarded&limit=50"
	}
	return fmt.Sprintf("/api/jobs/%d", jobID)
}

// riverUILabel says in the table what River UI was asked.
func riverUILabel(q string) string {
	if q == riverUIList {
		return riverUIVersion + ": `GET /api/jobs?state=discarded&limit=50`"
	}
	return riverUIVersion + ": `GET /api/jobs/{id}`"
}

// consolePages are the pages the table times, in its order: what an
// on-call engineer opens first. The search is the existing page
// benchmark's common one.
func consolePages() []consolePage {
	return []consolePage{
		{name: "list", label: "Dead-letter list page (HTML)", path: func(int64) string { return "/dead-letters" }, riverUI: riverUIList},
		{name: "apilist", label: "Dead-letter list, JSON API (`/api/v1/dead-letters?limit=50`)", api: true,
			path: func(int64) string { return "/api/v1/dead-letters?limit=50" }, riverUI: riverUIList},
		{name: "detail", label: "Dead-letter detail page (HTML)", path: func(id int64) string { return fmt.Sprintf("/dead-letters/%d", id) },
			riverUI: riverUIDetail},
		{name: "apidetail", label: "Dead-letter detail, JSON API", api: true,
			path: func(id int64) string { return fmt.Sprintf("/api/v1/dead-letters/%d", id) }, riverUI: riverUIDetail},
		{name: "search", label: "Free-text search page", path: func(int64) string { return "/dead-letters?q=connection+refused&status=all" }},
		{name: "overview", label: "Overview page", path: func(int64) string { return "/" }},
		{name: "groups", label: "Error groups page", path: func(int64) string { return "/groups" }},
	}
}

// readerPages are the pages the concurrent readers load round-robin.
func readerPages() []consolePage {
	var out []consolePage
	for _, pg := range consolePages() {
		if !pg.api {
			out = append(out, pg)
		}
	}
	return out
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
// time, after one untimed warm-up request. The pages River UI answers too
// are timed first, against it (comparedPages); River UI runs only then.
func (s *suite) pages(ctx context.Context, srv *server, db *pgxpool.Pool, round int) error {
	r := redriveEngine{}
	id, err := detailLetter(ctx, db, s.sizes.Letters)
	if err != nil {
		return err
	}
	// With --engine Redrive River's tables do not exist: the pages River
	// UI would answer are then timed alone, like the others.
	withRiver := slices.ContainsFunc(s.engines(), func(e engine) bool { return e.Name() == riverEngine{}.Name() })
	var errs []error
	if withRiver {
		errs = append(errs, s.comparedPages(ctx, srv, db, id, round))
	}
	for _, pg := range consolePages() {
		if pg.riverUI != "" && withRiver {
			continue
		}
		took, err := timePage(ctx, srv, pg.path(id), s.sizes.PageRequests)
		if err != nil {
			s.failRecord(r, "page."+pg.name+".p50", "page."+pg.name+".p95")
			errs = append(errs, err)
			continue
		}
		s.recordTimes(r, "page."+pg.name, round, took)
	}
	return errors.Join(errs...)
}

// recordTimes records the p50 and p95 of a page's timings.
func (s *suite) recordTimes(e engine, key string, round int, took []time.Duration) {
	ms := millis(took)
	s.record(key+".p50", e, round, quantile(ms, 0.50))
	s.record(key+".p95", e, round, quantile(ms, 0.95))
}

// comparedPages times the pages River UI answers too. River UI serves
// River's table of as many discarded jobs as there are letters, on the
// same cluster; Redrive's page and API answer and River UI's answer to
// the same question are requested in turn, PageRequests times each, the
// order rotating, so both see the same machine from moment to moment.
// River UI's figure is recorded under each of the Redrive rows it answers.
func (s *suite) comparedPages(ctx context.Context, srv *server, db *pgxpool.Pool, letterID int64, round int) error {
	r, river := redriveEngine{}, riverEngine{}
	var compared []consolePage
	var keys []string
	for _, pg := range consolePages() {
		if pg.riverUI != "" {
			compared = append(compared, pg)
			keys = append(keys, "page."+pg.name+".p50", "page."+pg.name+".p95")
		}
	}
	fail := func(err error) error {
		s.failRecord(r, keys...)
		s.failRecord(river, keys...)
		return fmt.Errorf("pages against River UI: %w", err)
	}
	name, err := s.riverUIData(ctx, db)
	if err != nil {
		return fail(err)
	}
	rdb, err := s.c.observe(ctx, name)
	if err != nil {
		return fail(err)
	}
	defer rdb.Close()
	jobID, err := riverUIJob(ctx, rdb, s.sizes.Letters)
	if err != nil {
		return fail(err)
	}
	ui, err := s.serveRiverUI(ctx, s.c.dsn(name))
	if err != nil {
		return fail(err)
	}
	defer ui.close()
	// One round of requests per River UI question (list, detail): the
	// Redrive pages that answer it, then River UI's.
	for _, q := range []string{riverUIList, riverUIDetail} {
		var group []consolePage
		var targets []target
		for _, pg := range compared {
			if pg.riverUI == q {
				group = append(group, pg)
				targets = append(targets, target{srv, pg.path(letterID)})
			}
		}
		targets = append(targets, target{ui, riverUIPath(q, jobID)})
		took, err := timeAlternating(ctx, targets, s.sizes.PageRequests)
		if err != nil {
			return fail(err)
		}
		for i, pg := range group {
			s.recordTimes(r, "page."+pg.name, round, took[i])
			s.recordTimes(river, "page."+pg.name, round, took[len(group)])
		}
	}
	return nil
}

// target is one URL of one server.
type target struct {
	srv  *server
	path string
}

// timeAlternating times n requests to each target, one request at a time,
// after one untimed warm-up each; request i starts with target i mod
// len(targets), so no target always follows the same one.
func timeAlternating(ctx context.Context, targets []target, n int) ([][]time.Duration, error) {
	took := make([][]time.Duration, len(targets))
	for i, t := range targets {
		if err := t.srv.get(ctx, t.path); err != nil {
			return nil, err
		}
		took[i] = make([]time.Duration, 0, n)
	}
	for i := range n {
		for j := range targets {
			k := (i + j) % len(targets)
			t0 := time.Now()
			if err := targets[k].srv.get(ctx, targets[k].path); err != nil {
				return nil, err
			}
			took[k] = append(took[k], time.Since(t0))
		}
	}
	return took, nil
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
	pages := readerPages()
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
