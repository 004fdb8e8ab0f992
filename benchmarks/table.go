package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// metric is one row of the table.
type metric struct {
	key   string
	label string
	unit  string
	// lowerBetter is true for times, sizes and counts of mistakes.
	lowerBetter bool
	// river is true when River is measured too, and a ratio is shown.
	river bool
}

// metrics are the table's rows, in order.
func metrics(sz Sizes) []metric {
	var out []metric
	for _, p := range []Profile{defaultProfile(), bestProfile()} {
		for _, n := range processCounts() {
			out = append(out, metric{key: drainKey("rate", p, n), river: true, unit: "jobs/s",
				label: fmt.Sprintf("Drain %s no-op jobs, %s, %d process%s", count(sz.DrainJobs), p.Name, n, plural(n))})
		}
	}
	for _, v := range drainVariants() {
		out = append(out,
			metric{key: variantKey("rate", v), unit: "jobs/s",
				label: fmt.Sprintf("Drain %s no-op jobs, defaults, 1 process, %s", count(sz.DrainJobs), v.label)},
			metric{key: variantKey("ratio", v), unit: "×",
				label: "The same over the plain drain's rate, round by round (1: no cost)"})
	}
	for _, p := range []Profile{defaultProfile(), bestProfile()} {
		for _, n := range processCounts() {
			out = append(out,
				metric{key: drainKey("dbms", p, n), river: true, unit: "ms/job", lowerBetter: true,
					label: fmt.Sprintf("Drain: database time per job, %s, %d process%s", p.Name, n, plural(n))},
				metric{key: drainKey("wal", p, n), river: true, unit: "bytes/job", lowerBetter: true,
					label: fmt.Sprintf("Drain: WAL bytes per job, %s, %d process%s", p.Name, n, plural(n))})
		}
	}
	out = append(out,
		metric{key: "latency.p50", label: "Enqueue-to-start on an idle worker, p50", unit: "ms", lowerBetter: true, river: true},
		metric{key: "latency.p95", label: "Enqueue-to-start on an idle worker, p95", unit: "ms", lowerBetter: true, river: true},
		metric{key: "enqueue", river: true, unit: "jobs/s",
			label: fmt.Sprintf("Batch enqueue through the Go API, %s per batch", count(sz.EnqueueBatch))},
		metric{key: "enqueue.http", unit: "jobs/s",
			label: fmt.Sprintf("Batch enqueue through the HTTP API (POST /api/v1/jobs/batch), %s per request", count(sz.EnqueueBatch))},
		metric{key: "ingest.http", unit: "letters/s",
			label: fmt.Sprintf("Letters another system sends (POST /api/v1/letters), %s per request", count(sz.EnqueueBatch))},
		metric{key: "deadletter.rate", river: true, unit: "letters/s",
			label: fmt.Sprintf("Dead-letter %s permanently failing jobs (%s, 1 process)", count(sz.DeadLetterJobs), deadLetterProfile().Name)},
		metric{key: "deadletter.misjudged", river: true, unit: "letters", lowerBetter: true,
			label: "Dead-lettering: misjudged (lease_expired, wrong reason or error, missing)"},
		metric{key: "deadletter.cpu", river: true, unit: "µs/letter", lowerBetter: true,
			label: "Dead-lettering: the worker's CPU per letter (Redrive's includes grouping it)"},
		metric{key: "deadletter.dbms", river: true, unit: "ms/letter", lowerBetter: true,
			label: "Dead-lettering: database time per letter"},
		metric{key: "seed", label: fmt.Sprintf("Seed %s letters (`redrive seed`)", count(sz.Letters)), unit: "s", lowerBetter: true},
		metric{key: "seed.search", label: "Their search rows, the second step (`redrive search rebuild`)", unit: "s", lowerBetter: true},
		metric{key: "size", label: "Database size per million letters (letters, search, summaries)", unit: "MiB", lowerBetter: true},
	)
	for _, pg := range consolePages() {
		vs := ""
		if pg.riverUI != "" {
			vs = "; River: " + riverUILabel(pg.riverUI)
		}
		out = append(out,
			metric{key: "page." + pg.name + ".p50", label: fmt.Sprintf("%s, p50 (%s letters%s)", pg.label, count(sz.Letters), vs),
				unit: "ms", lowerBetter: true, river: pg.riverUI != ""},
			metric{key: "page." + pg.name + ".p95", label: fmt.Sprintf("%s, p95", pg.label), unit: "ms", lowerBetter: true, river: pg.riverUI != ""})
	}
	out = append(out,
		metric{key: "rss.idle", label: "Console RSS, idle", unit: "MiB", lowerBetter: true},
		metric{key: "rss.peak", label: fmt.Sprintf("Console RSS, peak under %d concurrent readers", sz.Readers), unit: "MiB", lowerBetter: true},
		metric{key: "readers.rate", label: fmt.Sprintf("Console: pages served to %d concurrent readers", sz.Readers), unit: "pages/s"},
		metric{key: "bulk.replay", label: fmt.Sprintf("Bulk replay %s of %s letters by filter (API + runner)", count(sz.BulkSlice), count(sz.Letters)), unit: "letters/s"},
		metric{key: "bulk.discard", label: fmt.Sprintf("Bulk discard %s of %s letters by filter (API + runner)", count(sz.BulkSlice), count(sz.Letters)), unit: "letters/s"},
	)
	return out
}

func drainKey(what string, p Profile, procs int) string {
	return fmt.Sprintf("drain.%s.%s.%d", what, p.Name, procs)
}

// results holds every figure, per metric, engine and round, so that a
// ratio is taken between runs of the same round: Redrive's and River's
// runs alternate, and a round's two runs saw the same machine.
type results struct {
	runs   int
	values map[string]map[string]map[int]float64
	failed map[string]bool
}

func newResults(runs int) *results {
	return &results{runs: runs, values: map[string]map[string]map[int]float64{}, failed: map[string]bool{}}
}

func (r *results) add(key, engine string, round int, v float64) {
	if r.values[key] == nil {
		r.values[key] = map[string]map[int]float64{}
	}
	if r.values[key][engine] == nil {
		r.values[key][engine] = map[int]float64{}
	}
	r.values[key][engine][round] = v
}

// fail marks a figure as failed in at least one run.
func (r *results) fail(key, engine string) { r.failed[key+"|"+engine] = true }

func (r *results) sample(key, engine string) sample {
	var s sample
	for round := range r.runs {
		if v, ok := r.values[key][engine][round]; ok {
			s = append(s, v)
		}
	}
	return s
}

// ratios are Redrive/River, round by round.
func (r *results) ratios(key string) sample {
	var s sample
	for round := range r.runs {
		a, okA := r.values[key]["Redrive"][round]
		b, okB := r.values[key]["River"][round]
		if okA && okB && b != 0 {
			s = append(s, a/b)
		}
	}
	return s
}

// writeTable prints the figures as a Markdown table.
func (r *results) writeTable(w io.Writer, rows []metric) {
	fmt.Fprintln(w, "| measure | unit | Redrive | River 0.51.2 | Redrive/River |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|")
	for _, m := range rows {
		river, ratio := "—", "—"
		if m.river {
			river = r.cell(m.key, "River")
			if rs := r.ratios(m.key); len(rs) > 0 {
				ratio = spread(rs, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) })
				if m.lowerBetter {
					ratio += " ↓"
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", m.label, m.unit, r.cell(m.key, "Redrive"), river, ratio)
	}
}

func (r *results) cell(key, engine string) string {
	s := r.sample(key, engine)
	out := spread(s, number)
	if r.failed[key+"|"+engine] {
		if len(s) == 0 {
			return "failed"
		}
		out += " (a run failed)"
	}
	return out
}

// spread is "median (min–max)", or the single value of one run.
func spread(s sample, f func(float64) string) string {
	switch len(s) {
	case 0:
		return "—"
	case 1:
		return f(s[0])
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.median()), f(s.min()), f(s.max()))
}

// number prints a figure with the precision its size deserves.
func number(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a >= 100 || v == math.Trunc(v):
		return count(int(math.Round(v)))
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// count prints n with thousands separators: 1,000,000.
func count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}
