package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/redrive/redrive/worker"
)

// report is everything printed around the table: when, on what, with
// which settings, so a figure can be compared with a later one.
type report struct {
	started  time.Time
	took     time.Duration
	quick    bool
	version  string
	sizes    Sizes
	settings [][2]string
}

func (rp report) write(w io.Writer, s *suite) {
	mode := "full"
	if rp.quick {
		mode = "QUICK (harness check; not comparable with a full run)"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(w, "## Redrive vs River 0.51.2 — %s\n\n", rp.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "- mode: %s; %d run(s) of each figure: median (min–max); took %s\n", mode, rp.sizes.Runs, rp.took.Round(time.Second))
	fmt.Fprintf(w, "- redrive: %s; machine: %s, %d CPUs, %s %s/%s\n", rp.version, host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	var pg []string
	for _, kv := range rp.settings {
		pg = append(pg, kv[0]+"="+kv[1])
	}
	fmt.Fprintf(w, "- PostgreSQL (private cluster, same settings every run): %s\n", strings.Join(pg, ", "))
	for _, p := range []Profile{defaultProfile(), bestProfile()} {
		fmt.Fprintf(w, "- %s: Redrive %s%s; River MaxWorkers=%d%s\n", p.Name, describeRedrive(p.Redrive), describeByProcs(p),
			p.RiverMaxWorkers, describePool(p))
	}
	fmt.Fprintf(w, "- dead-lettering uses %q with 1 process; latency uses defaults with LISTEN/NOTIFY on, %d jobs %s apart\n\n",
		deadLetterProfile().Name, rp.sizes.LatencySamples, rp.sizes.LatencyGap)
	s.res.writeTable(w, metrics(rp.sizes))
	fmt.Fprintln(w, "\nRedrive/River is taken round by round (the engines' runs alternate) and")
	fmt.Fprintln(w, "summarised the same way; above 1 means Redrive's figure is larger. ↓ marks")
	fmt.Fprintln(w, "rows where smaller is better. Database time and WAL count the engine's own")
	fmt.Fprintln(w, "statements (pg_stat_statements), not autovacuum.")
	s.writeErrors(w)
}

// describeByProcs lists the configs a profile uses instead with more
// processes, e.g. " (2 processes: worker.Config{Concurrency=500} each)".
func describeByProcs(p Profile) string {
	var parts []string
	for _, n := range processCounts() {
		if c, ok := p.RedriveByProcs[n]; ok {
			parts = append(parts, fmt.Sprintf("%d process%s: %s each", n, plural(n), describeRedrive(c)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// describeRedrive lists the fields a worker.Config sets.
func describeRedrive(c worker.Config) string {
	var parts []string
	add := func(name string, set bool, v any) {
		if set {
			parts = append(parts, fmt.Sprintf("%s=%v", name, v))
		}
	}
	add("Concurrency", c.Concurrency != 0, c.Concurrency)
	add("PollInterval", c.PollInterval != 0, c.PollInterval)
	add("LeaseDuration", c.LeaseDuration != 0, c.LeaseDuration)
	add("HeartbeatInterval", c.HeartbeatInterval != 0, c.HeartbeatInterval)
	add("RescueInterval", c.RescueInterval != 0, c.RescueInterval)
	add("ListenDSN", c.ListenDSN != "", "set")
	if len(parts) == 0 {
		return "worker.Config{} (its defaults)"
	}
	return "worker.Config{" + strings.Join(parts, ", ") + "}"
}

func describePool(p Profile) string {
	if p.RiverPoolConns == 0 {
		return ", pgxpool default size"
	}
	return fmt.Sprintf(", pool of %d", p.RiverPoolConns)
}
