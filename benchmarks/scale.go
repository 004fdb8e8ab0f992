package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The scale step is `make bench SCALE=10M`: the console seeded at the
// normal run's size (Sizes.Letters, a million) and then at SCALE, in one
// invocation on one cluster, each read's p50 and p95 printed side by side
// with their ratio, the bulk actions at both, and at SCALE a retention
// purge of the oldest tenth of the letters while a reader keeps reading.
// Both sizes' databases are kept until the end, so that their reads can
// alternate: the disk must hold both (checkDisk).

// scaleEndingAgo is how long before the run began the newest letter of
// either size failed. The purge holds the settled letters of every group with a letter in the
// last hour (dlq.PurgeGrowingWindow) for an operator to confirm; seeded up
// to now, every group of the catalog is growing, and a purge would hold
// everything. Both sizes end at the same instant, so that the pages that
// read a recent window (a group's letters per minute over three hours)
// see the same stretch of time in both, though one is seeded later.
const scaleEndingAgo = 2 * time.Hour

// scaleFlatBound is what "flat" means: a read's p95 at the larger size at
// most this many times its p95 at the normal size (issue 33).
const scaleFlatBound = 1.5

// The two sizes' figures are kept in results under these names, as the
// engines' are in the normal run.
const (
	scaleBase  = "base"
	scaleLarge = "scale"
)

// scaleRe is a number of letters with an optional thousand or million.
var scaleRe = regexp.MustCompile(`^([0-9]+)([kKmM]?)$`)

// parseScale reads a number of letters: 10M, 2M, 500k or 10000000.
func parseScale(v string) (int, error) {
	m := scaleRe.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return 0, fmt.Errorf("%q is not a number of letters like 10M, 2M or 500k", v)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive number of letters", v)
	}
	switch strings.ToLower(m[2]) {
	case "k":
		n *= 1_000
	case "m":
		n *= 1_000_000
	}
	return n, nil
}

// scalePages are the reads timed at both sizes: the console's pages of
// the normal run, and one error group's page (the largest group's).
func scalePages(group *string) []consolePage {
	return append(consolePages(), consolePage{name: "group", label: "One error group's page (the largest)",
		path: func(int64) string { return "/groups/" + *group }})
}

// purgeReaderPages are what the reader requests in turn while the purge
// runs: what an on-call engineer has open.
var purgeReaderPages = []consolePage{
	{name: "overview", label: "Overview page", path: func(int64) string { return "/" }},
	{name: "list", label: "Dead-letter list page", path: func(int64) string { return "/dead-letters" }},
}

// scaleMaxWAL bounds the WAL the scale step keeps between checkpoints.
// The suite's 8 GB keeps checkpoints out of its short runs; seeds of
// millions of letters write tens of gigabytes, and would keep 8 GB of it
// on a disk the letters already fill.
const scaleMaxWAL = "1GB"

// boundWAL sets max_wal_size to scaleMaxWAL (a reload, no restart).
func (c *cluster) boundWAL(ctx context.Context) error {
	if _, err := c.admin.Exec(ctx, "ALTER SYSTEM SET max_wal_size = '"+scaleMaxWAL+"'"); err != nil {
		return fmt.Errorf("set max_wal_size: %w", err)
	}
	if _, err := c.admin.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload settings: %w", err)
	}
	// The server reloads a moment later: wait for it, so that the
	// table's header shows the setting the run had.
	for range 100 {
		var v string
		if err := c.admin.QueryRow(ctx, "SELECT current_setting('max_wal_size')").Scan(&v); err != nil {
			return fmt.Errorf("read max_wal_size: %w", err)
		}
		if v == scaleMaxWAL {
			return nil
		}
		if err := pause(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return errors.New("max_wal_size was not reloaded within 5 s")
}

// scaleBytesPerLetter is what a seeded letter takes on disk before the
// run has weighed its own: about 3 KB with its search row and indexes
// (docs/performance.md, the database-size row), with some room.
const scaleBytesPerLetter = 3_500

// scaleDiskSlack is what the run needs free beyond its letters: WAL
// (twice scaleMaxWAL before a checkpoint ends), VACUUM's and the search
// rebuild's temporary files.
const scaleDiskSlack = 4 << 30

// checkDisk refuses to seed letters more than the disk under the cluster
// has room for, at bytesPerLetter each: a full disk would stop this
// server and every other one on the machine.
func (c *cluster) checkDisk(letters int, bytesPerLetter float64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(c.dir, &st); err != nil {
		return fmt.Errorf("free disk: %w", err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	need := int64(float64(letters)*bytesPerLetter) + scaleDiskSlack
	if free < need {
		return fmt.Errorf("seeding %s letters needs about %.1f GiB free under %s (%.0f bytes a letter, and %.0f GiB of WAL and temporary files); %.1f GiB are",
			count(letters), float64(need)/(1<<30), c.dir, bytesPerLetter, float64(scaleDiskSlack)/(1<<30), float64(free)/(1<<30))
	}
	return nil
}

// scaleSide is one of the two sizes: its database, and the console
// serving it.
type scaleSide struct {
	name    string // scaleBase or scaleLarge: where its figures go
	letters int
	end     time.Time // when its newest letter failed
	db, dsn string
	pool    *pgxpool.Pool
	srv     *server
}

// scale measures the console at Sizes.Letters and at letters. Both sizes
// are seeded first, each on a database of its own, then served side by
// side, and each read is requested of the two in turn, so both see the
// same machine from one moment to the next (it is shared, and its speed
// swings); their ratio is taken between figures of the same moments. The
// bulk actions and the purge come after, one size at a time. The
// cluster's folder is weighed every few seconds throughout, for what the
// run needs free.
func (s *suite) scale(ctx context.Context, letters int) {
	weighCtx, stopWeighing := context.WithCancel(ctx)
	peak := make(chan int64, 1)
	go func() { peak <- peakDirSize(weighCtx, s.c.dir, 5*time.Second) }()
	// A seed of ten million takes ten times one of a million: the step's
	// bound grows with the letters (the whole run has --timeout).
	bound := time.Duration(1+letters/s.sizes.Letters) * 3 * s.sizes.RunTimeout
	s.doWithin(ctx, bound, fmt.Sprintf("console on %s and %s letters", count(s.sizes.Letters), count(letters)), func(ctx context.Context) error {
		end := time.Now().Add(-scaleEndingAgo)
		base := &scaleSide{name: scaleBase, letters: s.sizes.Letters, end: end}
		large := &scaleSide{name: scaleLarge, letters: letters, end: end}
		return s.withScaleSide(ctx, base, func() error {
			return s.withScaleSide(ctx, large, func() error {
				if err := s.scaleReads(ctx, base, large); err != nil {
					return err
				}
				var errs []error
				for _, side := range []*scaleSide{base, large} {
					for _, action := range []string{"replay", "discard"} {
						rate, err := s.bulkAction(ctx, side.srv, side.pool, action)
						if err != nil {
							errs = append(errs, fmt.Errorf("%s letters: %w", count(side.letters), err))
							continue
						}
						s.res.add("bulk."+action, side.name, 0, rate)
					}
				}
				return errors.Join(append(errs, s.scalePurge(ctx, large, letters/10))...)
			})
		})
	})
	stopWeighing()
	s.res.add("disk.peak", scaleLarge, 0, float64(<-peak)/(1<<30))
}

// withScaleSide seeds a fresh database with side's letters, weighs it,
// serves it, runs fn, and drops the database after.
func (s *suite) withScaleSide(ctx context.Context, side *scaleSide, fn func() error) error {
	return s.c.withDB(ctx, "redrive_scale", s.templates[redriveEngine{}.Name()].base, func(db string) error {
		side.db, side.dsn = db, s.c.dsn(db)
		if err := s.scaleSeed(ctx, side); err != nil {
			return err
		}
		pool, err := s.c.observe(ctx, db)
		if err != nil {
			return err
		}
		defer pool.Close()
		side.pool = pool
		var bytes int64
		if err := pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&bytes); err != nil {
			return fmt.Errorf("database size: %w", err)
		}
		s.res.add("size", side.name, 0, float64(bytes)/(1<<30))
		if side.srv, err = s.serve(ctx, side.dsn); err != nil {
			return err
		}
		defer side.srv.close()
		return fn()
	})
}

// scaleSeed seeds with `redrive seed`, builds the search rows with
// `redrive search rebuild`, and runs VACUUM ANALYZE, timing each; the
// seed's rate and peak memory too.
func (s *suite) scaleSeed(ctx context.Context, side *scaleSide) error {
	if err := s.c.checkDisk(side.letters, s.bytesPerLetter()); err != nil {
		return err
	}
	if err := s.c.quiesce(ctx); err != nil {
		return err
	}
	start := time.Now()
	_, state, err := s.redriveProcess(ctx, side.dsn, "", "seed", "--dead-letters", strconv.Itoa(side.letters),
		"--ending-ago", time.Since(side.end).Round(time.Second).String())
	if err != nil {
		return err
	}
	took := time.Since(start)
	s.res.add("seed", side.name, 0, took.Seconds())
	s.res.add("seed.rate", side.name, 0, perSecond(side.letters, took))
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok {
		s.res.add("seed.rss", side.name, 0, float64(ru.Maxrss)/1024) // KiB on Linux
	}
	s.log.Info("seeded", "letters", side.letters, "took", took.Round(time.Millisecond))
	start = time.Now()
	if _, err := s.redrive(ctx, side.dsn, "", "search", "rebuild"); err != nil {
		return err
	}
	s.res.add("seed.search", side.name, 0, time.Since(start).Seconds())
	s.log.Info("search rows built", "letters", side.letters, "took", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := s.c.vacuum(ctx, side.db); err != nil {
		return err
	}
	s.res.add("vacuum", side.name, 0, time.Since(start).Seconds())
	return nil
}

// bytesPerLetter is what a letter took in the normal size's database,
// once it is weighed, or scaleBytesPerLetter before.
func (s *suite) bytesPerLetter() float64 {
	if gib := s.res.sample("size", scaleBase); len(gib) > 0 {
		return gib[0] * (1 << 30) / float64(s.sizes.Letters) * 1.1 // 10 % for a larger database's fuller indexes
	}
	return scaleBytesPerLetter
}

// scaleReads times each read of both sizes PageRequests times, the two
// requested in turn (timeAlternating), in Sizes.Runs passes; each pass
// gives one p50 and one p95 a size, and the table shows their median over
// the passes.
func (s *suite) scaleReads(ctx context.Context, sides ...*scaleSide) error {
	ids, groups := make([]int64, len(sides)), make([]string, len(sides))
	for i, side := range sides {
		var err error
		if ids[i], err = detailLetter(ctx, side.pool, side.letters); err != nil {
			return err
		}
		if err := side.pool.QueryRow(ctx, `SELECT fingerprint FROM error_groups ORDER BY total DESC, fingerprint LIMIT 1`).Scan(&groups[i]); err != nil {
			return fmt.Errorf("pick a group: %w", err)
		}
	}
	if err := s.c.quiesce(ctx); err != nil {
		return err
	}
	pages := make([][]consolePage, len(sides)) // the same pages, each side's group
	for i := range sides {
		pages[i] = scalePages(&groups[i])
	}
	for pass := range s.sizes.Runs {
		for p, page := range pages[0] {
			var targets []target
			for i, side := range sides {
				targets = append(targets, target{side.srv, pages[i][p].path(ids[i])})
			}
			took, err := timeAlternating(ctx, targets, s.sizes.PageRequests)
			if err != nil {
				return err
			}
			name := page.name
			for i, side := range sides {
				ms := millis(took[i])
				s.res.add("page."+name+".p50", side.name, pass, quantile(ms, 0.50))
				s.res.add("page."+name+".p95", side.name, pass, quantile(ms, 0.95))
			}
		}
	}
	return nil
}

// settledCutoffSQL is when the n-th oldest settled letter was settled,
// along dead_letter_outcomes_settled_idx: a purge with that cutoff deletes
// the oldest n (none of the groups is growing: scaleEndingAgo).
const settledCutoffSQL = `SELECT coalesce(discarded_at, replayed_at) FROM dead_letter_outcomes
	ORDER BY coalesce(discarded_at, replayed_at) OFFSET $1 - 1 LIMIT 1`

// lockWaitsSQL finds the backends of a database waiting for a lock, and
// how long the longest has been running the statement that waits.
const lockWaitsSQL = `SELECT count(*), coalesce(max(extract(epoch FROM clock_timestamp() - query_start)), 0)::float8
	FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`

// scalePurgeRe reads what `redrive purge` printed.
var scalePurgeRe = regexp.MustCompile(`purged (\d+) settled dead letters`)

// scalePurge runs the product's retention purge, `redrive purge
// --older-than`, with the age that reaches the n oldest settled letters,
// while a reader requests the overview and the list in turn, one request
// at a time, and the server's lock waits are sampled: the purge's time,
// the letters it deleted, the reader's p95 and max per page, and the
// longest lock wait seen.
func (s *suite) scalePurge(ctx context.Context, side *scaleSide, n int) error {
	var cutoff time.Time
	if err := side.pool.QueryRow(ctx, settledCutoffSQL, n).Scan(&cutoff); err != nil {
		return fmt.Errorf("purge: find the cutoff of the oldest %d settled letters: %w", n, err)
	}
	if err := s.c.quiesce(ctx); err != nil {
		return err
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	// The reader finishes the request it is in when the purge ends: a
	// request cancelled half way would be an error in the console's log,
	// not a page read.
	var purgeDone atomic.Bool
	var wg sync.WaitGroup
	took := make(map[string][]time.Duration)
	var readErr error
	wg.Go(func() {
		for i := 0; !purgeDone.Load() && ctx.Err() == nil; i++ {
			pg := purgeReaderPages[i%len(purgeReaderPages)]
			t0 := time.Now()
			if err := side.srv.get(ctx, pg.path(0)); err != nil {
				readErr = err
				return
			}
			took[pg.name] = append(took[pg.name], time.Since(t0))
		}
	})
	var waits lockWaits
	wg.Go(func() { waits = s.watchLockWaits(watchCtx, side.db) })
	// Microseconds: the purge's cutoff is its own clock less the age, a
	// few milliseconds after this one, so a few letters more may go.
	age := fmt.Sprintf("%dus", time.Since(cutoff).Microseconds())
	start := time.Now()
	out, err := s.redrive(ctx, side.dsn, "", "purge", "--older-than", age, "--actor", "bench")
	purgeTook := time.Since(start)
	purgeDone.Store(true)
	stopWatching()
	wg.Wait()
	if err != nil {
		return err
	}
	if readErr != nil {
		return fmt.Errorf("reader during the purge: %w", readErr)
	}
	if waits.err != nil {
		return waits.err
	}
	m := scalePurgeRe.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("purge: unexpected output %q", out)
	}
	purged, _ := strconv.Atoi(m[1])
	if purged < n {
		return fmt.Errorf("purge: deleted %d letters, want at least %d (held? %s)", purged, n, strings.TrimSpace(out))
	}
	s.res.add("purge", scaleLarge, 0, purgeTook.Seconds())
	s.res.add("purge.letters", scaleLarge, 0, float64(purged))
	s.res.add("purge.rate", scaleLarge, 0, perSecond(purged, purgeTook))
	for _, pg := range purgeReaderPages {
		ms := millis(took[pg.name])
		s.res.add("purge.read."+pg.name+".n", scaleLarge, 0, float64(len(ms)))
		s.res.add("purge.read."+pg.name+".p95", scaleLarge, 0, quantile(ms, 0.95))
		s.res.add("purge.read."+pg.name+".max", scaleLarge, 0, quantile(ms, 1))
	}
	s.res.add("purge.lockwait", scaleLarge, 0, waits.longest.Seconds()*1000)
	s.res.add("purge.lockwaiters", scaleLarge, 0, float64(waits.samples))
	return nil
}

// lockWaits is what watchLockWaits saw.
type lockWaits struct {
	// samples counts the samples in which some backend waited for a lock.
	samples int
	// longest is the longest such backend had been in its statement.
	longest time.Duration
	err     error
}

// watchLockWaits samples the database's lock waits every 20 ms until ctx
// ends.
func (s *suite) watchLockWaits(ctx context.Context, dbName string) lockWaits {
	var w lockWaits
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return w
		case <-tick.C:
		}
		var waiting int
		var secs float64
		if err := s.c.admin.QueryRow(ctx, lockWaitsSQL, dbName).Scan(&waiting, &secs); err != nil {
			if ctx.Err() == nil {
				w.err = fmt.Errorf("lock waits: %w", err)
			}
			return w
		}
		if waiting > 0 {
			w.samples++
			w.longest = max(w.longest, time.Duration(secs*float64(time.Second)))
		}
	}
}

// peakDirSize weighs the files under dir every interval until ctx ends
// and returns the largest total seen: the cluster's data and WAL.
func peakDirSize(ctx context.Context, dir string, interval time.Duration) int64 {
	var peak int64
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		peak = max(peak, dirSize(dir))
		select {
		case <-ctx.Done():
			return max(peak, dirSize(dir))
		case <-tick.C:
		}
	}
}

// dirSize adds up the sizes of the files under dir; files that vanish
// while it walks (a dropped table, a recycled WAL segment) count nothing.
func dirSize(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += info.Size()
		}
		return nil
	})
	return total
}
