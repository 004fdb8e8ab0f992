package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// scaleRow is one row of the scale step's table.
type scaleRow struct {
	key, label, unit string
	// flat marks the p95 rows held to scaleFlatBound.
	flat bool
	// largeOnly rows are measured at the larger size only.
	largeOnly bool
}

// scaleRows are the scale table's rows, in order: the reads, what the
// letters cost to write and keep, the bulk actions, the purge, the disk.
func scaleRows(sz Sizes, letters int) []scaleRow {
	var rows []scaleRow
	group := ""
	for _, pg := range scalePages(&group) {
		rows = append(rows,
			scaleRow{key: "page." + pg.name + ".p50", label: pg.label + ", p50", unit: "ms"},
			scaleRow{key: "page." + pg.name + ".p95", label: pg.label + ", p95", unit: "ms", flat: true})
	}
	rows = append(rows,
		scaleRow{key: "seed", label: "Seed (`redrive seed --dead-letters N`)", unit: "s"},
		scaleRow{key: "seed.rate", label: "Seed rate", unit: "letters/s"},
		scaleRow{key: "seed.rss", label: "Seed's peak resident memory (`redrive seed`)", unit: "MiB"},
		scaleRow{key: "seed.search", label: "Their search rows (`redrive search rebuild`)", unit: "s"},
		scaleRow{key: "vacuum", label: "`VACUUM ANALYZE` after the seed", unit: "s"},
		scaleRow{key: "size", label: "Database size (`pg_database_size`)", unit: "GiB"},
		scaleRow{key: "bulk.replay", label: fmt.Sprintf("Bulk replay of the newest %s pending letters by filter (API + runner)", count(sz.BulkSlice)), unit: "letters/s"},
		scaleRow{key: "bulk.discard", label: fmt.Sprintf("Bulk discard of the next %s by filter (API + runner)", count(sz.BulkSlice)), unit: "letters/s"},
		scaleRow{key: "purge", label: fmt.Sprintf("Retention: purge of the oldest %s settled letters (`redrive purge --older-than`)", count(letters/10)), unit: "s", largeOnly: true},
		scaleRow{key: "purge.letters", label: "Letters the purge deleted", unit: "letters", largeOnly: true},
		scaleRow{key: "purge.rate", label: "Purge rate", unit: "letters/s", largeOnly: true},
	)
	for _, pg := range purgeReaderPages {
		rows = append(rows,
			scaleRow{key: "purge.read." + pg.name + ".n", label: pg.label + " during the purge: requests (one reader, pages in turn)", unit: "requests", largeOnly: true},
			scaleRow{key: "purge.read." + pg.name + ".p95", label: pg.label + " during the purge, p95", unit: "ms", largeOnly: true},
			scaleRow{key: "purge.read." + pg.name + ".max", label: pg.label + " during the purge, max", unit: "ms", largeOnly: true})
	}
	return append(rows,
		scaleRow{key: "purge.lockwait", label: "Longest lock wait seen during the purge (sampled every 20 ms; 0: none seen)", unit: "ms", largeOnly: true},
		scaleRow{key: "purge.lockwaiters", label: "Samples with a backend waiting for a lock during the purge", unit: "samples", largeOnly: true},
		scaleRow{key: "disk.peak", label: "The cluster's folder at its peak, data and WAL (what the run needs free)", unit: "GiB", largeOnly: true},
	)
}

// writeScale prints the scale step's table with the run's conditions.
func (rp report) writeScale(w io.Writer, s *suite, letters int) {
	host, _ := os.Hostname()
	base, large := count(rp.sizes.Letters), count(letters)
	fmt.Fprintf(w, "## From %s to %s letters — %s\n\n", base, large, rp.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- took %s; redrive: %s; machine: %s, %d CPUs, %s %s/%s\n", rp.took.Round(time.Second), rp.version, host,
		runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	var pg []string
	for _, kv := range rp.settings {
		pg = append(pg, kv[0]+"="+kv[1])
	}
	fmt.Fprintf(w, "- PostgreSQL (private cluster, the settings of `make bench`): %s\n", strings.Join(pg, ", "))
	fmt.Fprintf(w, "- each size seeded on a fresh database of its own (`redrive seed --ending-ago`: the newest letter of both %s before the run began), then `redrive search rebuild` and `VACUUM ANALYZE`; both served side by side\n", scaleEndingAgo)
	fmt.Fprintf(w, "- reads: %d passes of %d requests per page to each size, one at a time, the two sizes in turn, after a warm-up; each cell is the median of the passes' p50 or p95 (min–max)\n\n",
		rp.sizes.Runs, rp.sizes.PageRequests)
	fmt.Fprintf(w, "| measure | unit | %s letters | %s letters | ratio | p95 within %.1f× |\n", base, large, scaleFlatBound)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|")
	var notFlat []string
	flat := 0
	for _, row := range scaleRows(rp.sizes, letters) {
		baseCell, ratio, verdict := s.res.cell(row.key, scaleBase), "—", ""
		if row.largeOnly {
			baseCell = "—"
		} else if b, l := s.res.sample(row.key, scaleBase).median(), s.res.sample(row.key, scaleLarge).median(); b > 0 && l == l {
			r := l / b
			ratio = strconv.FormatFloat(r, 'f', 2, 64)
			if row.flat {
				if r <= scaleFlatBound {
					verdict, flat = "yes", flat+1
				} else {
					verdict = "**no**"
					notFlat = append(notFlat, strings.TrimSuffix(row.label, ", p95"))
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", row.label, row.unit, baseCell, s.res.cell(row.key, scaleLarge), ratio, verdict)
	}
	fmt.Fprintf(w, "\nReads whose p95 at %s letters is within %.1f× of their p95 at %s: %d", large, scaleFlatBound, base, flat)
	if len(notFlat) > 0 {
		fmt.Fprintf(w, "; not: %s", strings.Join(notFlat, "; "))
	}
	fmt.Fprintln(w, ".")
	s.writeErrors(w)
}
