package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Job is the job a handler runs: a copy of the claimed row, with Attempt
// already counting this run (1 on the first).
type Job = dlq.Job

// Handler runs one job. It returns nil on success, Permanent(err) for a
// failure that retrying cannot fix, and any other error for a transient
// failure. It must return soon after ctx is cancelled (timeout, shutdown,
// lost lease), and must tolerate running more than once for the same job
// (see the package doc).
type Handler func(ctx context.Context, job *Job) error

// TaskOptions tune one task.
type TaskOptions struct {
	// Timeout bounds one attempt through the handler's context. Zero uses
	// Config.DefaultTimeout.
	Timeout time.Duration
}

type task struct {
	handler Handler
	opts    TaskOptions
}

// Registry maps task names to handlers. Build it before calling New; it is
// not safe for concurrent use.
type Registry struct {
	tasks     map[string]task
	schedules map[string]registeredSchedule
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tasks: map[string]task{}, schedules: map[string]registeredSchedule{}}
}

// Register adds the handler for a task. Like http.ServeMux.Handle it panics
// on a programming error (an invalid or duplicate name, a nil handler, a
// negative timeout), since those are caught the first time the program
// starts.
func (r *Registry) Register(name string, h Handler, opts TaskOptions) {
	if msg := dlq.TaskNameProblem(name); msg != "" {
		panic(fmt.Sprintf("worker: invalid task name %q: %s", name, msg))
	}
	if h == nil {
		panic(fmt.Sprintf("worker: nil handler for task %q", name))
	}
	if opts.Timeout < 0 {
		panic(fmt.Sprintf("worker: negative timeout for task %q", name))
	}
	if _, dup := r.tasks[name]; dup {
		panic(fmt.Sprintf("worker: task %q registered twice", name))
	}
	r.tasks[name] = task{handler: h, opts: opts}
}

// Tasks returns the registered task names, sorted.
func (r *Registry) Tasks() []string {
	return slices.Sorted(maps.Keys(r.tasks))
}

// Schedules returns the registered schedules' names, sorted.
func (r *Registry) Schedules() []string {
	return slices.Sorted(maps.Keys(r.schedules))
}

// snapshot copies the tasks so a Worker is unaffected by later changes.
func (r *Registry) snapshot() map[string]task {
	return maps.Clone(r.tasks)
}

// scheduleSnapshot copies the schedules, in name order.
func (r *Registry) scheduleSnapshot() []registeredSchedule {
	out := make([]registeredSchedule, 0, len(r.schedules))
	for _, name := range r.Schedules() {
		out = append(out, r.schedules[name])
	}
	return out
}
