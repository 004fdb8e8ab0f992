package main

import (
	"time"

	"github.com/redrive/redrive/worker"
)

// This file is the one place the benchmark's knobs live: sizes, repetitions,
// timeouts and, above all, the engine settings the table calls "defaults"
// and "best". Tune "best" here (and only here) when the engine changes; the
// table prints what was used, so a figure never loses its settings.

// Sizes says how much work each measurement does and how often it repeats.
type Sizes struct {
	// Runs of every measurement; each figure is their median, with min–max.
	Runs int
	// DrainJobs pre-enqueued no-op jobs are drained per throughput run.
	DrainJobs int
	// EnqueueJobs are inserted per batch-enqueue run, EnqueueBatch at a time.
	EnqueueJobs, EnqueueBatch int
	// LatencySamples jobs are enqueued one at a time on an idle worker,
	// LatencyGap apart, so the worker is idle again each time.
	LatencySamples int
	LatencyGap     time.Duration
	// DeadLetterJobs failing jobs are dead-lettered per run.
	DeadLetterJobs int
	// Letters are seeded per console run; BulkSlice of them are replayed,
	// and the next BulkSlice discarded, by filter.
	Letters, BulkSlice int
	// PageRequests are timed per console page per run, one at a time.
	PageRequests int
	// Readers read the console at once for ReadFor while its RSS is sampled.
	Readers int
	ReadFor time.Duration
	// RunTimeout bounds any single run (one drain, one seed, ...).
	RunTimeout time.Duration
}

// fullSizes are `make bench`: the sizes the issue asks for.
func fullSizes() Sizes {
	return Sizes{
		Runs:           3,
		DrainJobs:      200_000,
		EnqueueJobs:    200_000,
		EnqueueBatch:   1_000,
		LatencySamples: 100,
		LatencyGap:     200 * time.Millisecond,
		DeadLetterJobs: 100_000,
		Letters:        1_000_000,
		BulkSlice:      100_000,
		PageRequests:   40,
		Readers:        50,
		ReadFor:        20 * time.Second,
		RunTimeout:     20 * time.Minute,
	}
}

// quickSizes are `make bench QUICK=1`: enough to check the harness itself
// in a few minutes. Its figures are not comparable with the full run's.
func quickSizes() Sizes {
	return Sizes{
		Runs:           1,
		DrainJobs:      20_000,
		EnqueueJobs:    20_000,
		EnqueueBatch:   1_000,
		LatencySamples: 30,
		LatencyGap:     200 * time.Millisecond,
		DeadLetterJobs: 20_000,
		Letters:        100_000,
		BulkSlice:      10_000,
		PageRequests:   10,
		Readers:        50,
		ReadFor:        5 * time.Second,
		RunTimeout:     10 * time.Minute,
	}
}

// Profile is one named set of engine settings: what a worker process runs
// with in a throughput or dead-letter run.
type Profile struct {
	// Name appears in the table: "defaults" or "best".
	Name string
	// Redrive is the worker.Config of each Redrive worker process (Registry
	// and ID are filled in by the process). The zero Config is Redrive's
	// defaults.
	Redrive worker.Config
	// RedriveByProcs, when it has an entry for a run's number of worker
	// processes, is each process's worker.Config in such a run instead of
	// Redrive: the slots one process should have depend on how many
	// processes share the two cores.
	RedriveByProcs map[int]worker.Config
	// RiverMaxWorkers is QueueConfig.MaxWorkers of River's default queue.
	RiverMaxWorkers int
	// RiverPoolConns is the pgx pool size of each River process; 0 keeps
	// pgxpool's default (the larger of 4 and the number of CPUs).
	RiverPoolConns int
	// JobLogLines is how many lines each Redrive job logs through
	// worker.Logger before it returns (BENCH_JOB_LOG_LINES): the cost of
	// the lines an attempt keeps. 0, the default, logs none.
	JobLogLines int
	// JobLogPlain has those lines logged through a slog text logger of the
	// job's own that writes them nowhere instead of worker.Logger: the
	// lines' own cost, for comparison.
	JobLogPlain bool
}

// forProcs is p as each of procs worker processes runs it.
func (p Profile) forProcs(procs int) Profile {
	if c, ok := p.RedriveByProcs[procs]; ok {
		p.Redrive = c
	}
	return p
}

// defaultProfile is each engine as it comes: Redrive's zero worker.Config
// (100 jobs at once, 1 s poll) and River with MaxWorkers 100, the value its
// documentation configures (River has no built-in default: MaxWorkers is
// required).
func defaultProfile() Profile {
	return Profile{Name: "defaults", Redrive: worker.Config{}, RiverMaxWorkers: 100}
}

// bestProfile is each engine tuned for throughput of short jobs. River's
// 2,000 workers are what its own `river bench` runs with. Redrive's best is
// 1,000 slots: claims of up to 250 jobs and outcome batches of hundreds;
// more slots only lengthen the outcome backlog on two cores. Two processes
// get 500 each, the same 1,000 in all: with 1,000 each the database spent
// 0.146 ms per job against 0.064 with one process (two claims of up to
// 1,000 contend for the head of the same index, each skipping the rows the
// other holds locked). Not yet measured on a quiet machine.
func bestProfile() Profile {
	return Profile{
		Name: "best",
		Redrive: worker.Config{
			Concurrency: 1_000,
		},
		RedriveByProcs:  map[int]worker.Config{2: {Concurrency: 500}},
		RiverMaxWorkers: 2_000,
	}
}

// deadLetterProfile is what the dead-lettering runs use: the best settings,
// one process.
func deadLetterProfile() Profile { return bestProfile() }

// processCounts are the numbers of worker processes each throughput
// profile runs with.
func processCounts() []int { return []int{1, 2} }

// Cluster settings: fixed so every run sees the same server. localpg
// itself fixes shared_buffers=256MB and max_connections=200 on its command
// line; these are set with ALTER SYSTEM and a restart. Durable: fsync on.
// No checkpoint falls inside a run: each run starts with CHECKPOINT, and
// max_wal_size and checkpoint_timeout are far larger than one run writes.
func clusterSettings() [][2]string {
	return [][2]string{
		{"shared_preload_libraries", "pg_stat_statements"},
		{"work_mem", "16MB"},
		{"maintenance_work_mem", "256MB"},
		{"effective_cache_size", "4GB"},
		{"max_wal_size", "8GB"},
		{"checkpoint_timeout", "30min"},
		{"synchronous_commit", "on"},
		{"random_page_cost", "1.1"},
		{"jit", "off"},
	}
}

// shownSettings are read back from the server and printed with the table.
func shownSettings() []string {
	return []string{"server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "work_mem",
		"maintenance_work_mem", "effective_cache_size", "max_connections", "max_wal_size", "checkpoint_timeout",
		"random_page_cost", "jit", "shared_preload_libraries",
	}
}
