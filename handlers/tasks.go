package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// TimingsReader reads the tasks' timing summaries (store/queue, through
// reads): one task, or every task when task is "".
type TimingsReader interface {
	Timings(ctx context.Context, task string, now time.Time) ([]dlq.TaskTimings, error)
}

// Tasks renders /tasks: every task that ran in the last 14 days.
func Tasks(store TimingsReader, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		all, err := store.Timings(c.Request().Context(), "", now())
		if err != nil {
			return err
		}
		page := views.TasksPage{FlushEvery: spanText(dlq.TimingsFlushInterval)}
		for _, t := range all {
			cells := timingCells(t)
			page.Rows = append(page.Rows, views.TaskRow{Name: t.Task, Href: views.TaskHref(t.Task),
				Hour: cells[0], Fortnight: cells[len(cells)-1]})
		}
		return Render(c, http.StatusOK, views.Layout(Meta(c, "Tasks", "tasks", version), views.Tasks(page)))
	}
}

// TaskPage renders /tasks/:task: its runs and timings over each window. A
// task that never ran (a River task, or a name mistyped) gets the page
// with nothing counted, saying so; a name no task can have is a 400.
func TaskPage(store TimingsReader, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, err := readTaskTimings(c, store, now())
		if err != nil {
			return err
		}
		page := views.TaskPage{Name: t.Task, Windows: timingCells(t), FlushEvery: spanText(dlq.TimingsFlushInterval),
			LettersHref: "/dead-letters?" + url.Values{"task": {t.Task}}.Encode(),
			JobsHref:    "/jobs?" + url.Values{"task": {t.Task}}.Encode()}
		for _, w := range t.Windows {
			page.Ran = page.Ran || w.Runs > 0
		}
		return Render(c, http.StatusOK, views.Layout(Meta(c, "Task "+t.Task, "tasks", version), views.Task(page)))
	}
}

// readTaskTimings reads the task named by the path, with a summary of
// zeros for each window when it has none.
func readTaskTimings(c echo.Context, store TimingsReader, now time.Time) (dlq.TaskTimings, error) {
	task, err := url.PathUnescape(c.Param("task"))
	if err != nil || dlq.TaskNameProblem(task) != "" {
		return dlq.TaskTimings{}, BadRequest("invalid_task", "%q is not a task name: task names are 1-%d letters, digits or . _ : -", c.Param("task"), dlq.MaxTaskNameLen)
	}
	found, err := store.Timings(c.Request().Context(), task, now)
	if err != nil {
		return dlq.TaskTimings{}, err
	}
	if len(found) == 1 {
		return found[0], nil
	}
	return dlq.TaskTimings{Task: task, Windows: make([]dlq.TimingSummary, len(dlq.TimingWindows()))}, nil
}

// timingCells writes a task's windows for people.
func timingCells(t dlq.TaskTimings) []views.TimingCell {
	windows := dlq.TimingWindows()
	cells := make([]views.TimingCell, len(windows))
	labels := map[string]string{"1h": "Last hour", "1d": "Last day", "14d": "Last 14 days"}
	for i, w := range windows {
		s := t.Windows[i]
		cell := views.TimingCell{Window: w.Name, Label: labels[w.Name], Runs: s.Runs, Failures: s.Failures, Dead: s.Dead,
			FailureRate: "–"}
		if s.Runs > 0 {
			cell.FailureRate = fmt.Sprintf("%.1f %%", 100*float64(s.Failures)/float64(s.Runs))
		}
		cell.WaitP50, cell.WaitP95, cell.WaitP99 = quantileText(s.Wait, 0.5), quantileText(s.Wait, 0.95), quantileText(s.Wait, 0.99)
		cell.RunP50, cell.RunP95, cell.RunP99 = quantileText(s.Run, 0.5), quantileText(s.Run, 0.95), quantileText(s.Run, 0.99)
		cells[i] = cell
	}
	return cells
}

// quantileText writes a percentile as a person reads it: "< 0.1 ms",
// "12 ms", "1.4 s", "3 min"; "–" when nothing was counted.
func quantileText(h dlq.TimingHistogram, q float64) string {
	d, ok := h.Quantile(q)
	switch {
	case !ok:
		return "–"
	case d < dlq.TimingBase:
		return "< 0.1 ms"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	default:
		return spanText(d)
	}
}

// apiTiming is one window of a task in the API, its durations in
// milliseconds (fractions under a millisecond kept).
type apiTiming struct {
	Window      string       `json:"window"`
	Runs        int64        `json:"runs"`
	Failures    int64        `json:"failures"`
	DeadLetters int64        `json:"dead_letters"`
	WaitMS      *apiQuantile `json:"wait_ms"`
	RunMS       *apiQuantile `json:"run_ms"`
}

// apiQuantile is p50, p95 and p99 of one histogram; null in apiTiming
// when nothing was counted.
type apiQuantile struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// apiTask is a task and its windows in the API.
type apiTask struct {
	Task    string      `json:"task"`
	Windows []apiTiming `json:"windows"`
}

func toAPITask(t dlq.TaskTimings) apiTask {
	out := apiTask{Task: t.Task, Windows: []apiTiming{}}
	for i, w := range dlq.TimingWindows() {
		s := t.Windows[i]
		out.Windows = append(out.Windows, apiTiming{Window: w.Name, Runs: s.Runs, Failures: s.Failures, DeadLetters: s.Dead,
			WaitMS: toAPIQuantile(s.Wait), RunMS: toAPIQuantile(s.Run)})
	}
	return out
}

func toAPIQuantile(h dlq.TimingHistogram) *apiQuantile {
	if h.Count() == 0 {
		return nil
	}
	ms := func(q float64) float64 {
		d, _ := h.Quantile(q)
		return float64(d.Microseconds()) / 1000
	}
	return &apiQuantile{P50: ms(0.5), P95: ms(0.95), P99: ms(0.99)}
}

// APITasks answers GET /api/v1/tasks: every task that ran in the last 14
// days with its windows.
func APITasks(store TimingsReader, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		all, err := store.Timings(c.Request().Context(), "", now())
		if err != nil {
			return err
		}
		out := struct {
			Tasks []apiTask `json:"tasks"`
		}{Tasks: []apiTask{}}
		for _, t := range all {
			out.Tasks = append(out.Tasks, toAPITask(t))
		}
		return c.JSON(http.StatusOK, out)
	}
}

// APITask answers GET /api/v1/tasks/{task}: one task's windows, zeros when
// it has not run in the last 14 days.
func APITask(store TimingsReader, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, err := readTaskTimings(c, store, now())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, toAPITask(t))
	}
}
