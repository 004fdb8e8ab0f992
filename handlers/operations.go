package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// The page of a bulk operation. The runner does the work; this page only
// reads the operation's row (and, for a canary, its first jobs) and polls
// a fragment every second while the operation can still change, so no
// request is ever held open by a large operation.

// OperationReader is what the operation page reads.
type OperationReader interface {
	Operation(ctx context.Context, id int64) (dlq.Operation, error)
	OperationJobs(ctx context.Context, opID int64, limit int) ([]dlq.JobOutcome, error)
	OperationSkips(ctx context.Context, op dlq.Operation) (dlq.SkipCounts, error)
	OperationReplays(ctx context.Context, opID int64) (dlq.ReplayCounts, error)
}

// OperationChanger cancels operations, releases canaries, resumes what the
// died-again guard paused and stops following settling ones (replay.Service).
type OperationChanger interface {
	Cancel(ctx context.Context, id int64, a replay.Actor, key string) (dlq.Operation, error)
	ReleaseCanary(ctx context.Context, id int64, a replay.Actor, key string) (dlq.Operation, error)
	Resume(ctx context.Context, id int64, a replay.Actor, key string) (dlq.Operation, error)
	StopFollowing(ctx context.Context, id int64, a replay.Actor, key string) (dlq.Operation, error)
}

// OperationPage renders GET /operations/:id.
func OperationPage(store OperationReader, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		return renderOperation(c, store, version, http.StatusOK, nil, false)
	}
}

// OperationProgressFragment renders GET /operations/:id/progress, the part
// of the page htmx swaps every second.
func OperationProgressFragment(store OperationReader) echo.HandlerFunc {
	return func(c echo.Context) error {
		return renderOperation(c, store, "", http.StatusOK, nil, true)
	}
}

// CancelOperation handles POST /operations/:id/cancel. Cancelling twice
// (a double click) is harmless: the second finds the operation cancelled
// and shows it; cancelling one that already ended says so (409).
func CancelOperation(store OperationReader, svc OperationChanger, version string) echo.HandlerFunc {
	return changeOperation(store, version, dlq.OpCancelled, "cancel", svc.Cancel)
}

// ReleaseOperation handles POST /operations/:id/release: the canary went
// well (or died, and the operator releases anyway), replay the rest.
func ReleaseOperation(store OperationReader, svc OperationChanger, version string) echo.HandlerFunc {
	return changeOperation(store, version, dlq.OpRunning, "release", svc.ReleaseCanary)
}

// ResumeOperation handles POST /operations/:id/resume: the died-again
// guard paused it, and the operator lets it go on.
func ResumeOperation(store OperationReader, svc OperationChanger, version string) echo.HandlerFunc {
	return changeOperation(store, version, dlq.OpRunning, "resume", svc.Resume)
}

// StopFollowingOperation handles POST /operations/:id/stop-following: the
// operation ends now, its remaining replays run as any job does.
func StopFollowingOperation(store OperationReader, svc OperationChanger, version string) echo.HandlerFunc {
	return changeOperation(store, version, dlq.OpDone, "stop following", svc.StopFollowing)
}

func changeOperation(store OperationReader, version string, goal dlq.OperationState, verb string,
	change func(context.Context, int64, replay.Actor, string) (dlq.Operation, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseOperationID(c)
		if err != nil {
			return err
		}
		// No key: a repeated click finds the change made and is answered
		// as a success below.
		_, err = change(c.Request().Context(), id, ActorFrom(c), "")
		switch {
		case err == nil:
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/operations/%d", id))
		case errors.Is(err, dlq.ErrNotFound):
			return NotFound("There is no operation %d.", id)
		case !errors.Is(err, dlq.ErrConflict):
			return err
		}
		op, rerr := store.Operation(c.Request().Context(), id)
		if rerr != nil {
			return rerr
		}
		// Already past the goal: released or resumed and since settling or done.
		past := goal == dlq.OpRunning && (op.State == dlq.OpSettling || op.State == dlq.OpDone)
		if op.State == goal || past {
			// Someone (or an earlier click) already did it.
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/operations/%d", id))
		}
		problem := &views.Notice{Kind: "error", Message: fmt.Sprintf("Nothing to %s: this operation is %s.", verb, strings.ToLower(opStateText(op, nil)))}
		return renderOperation(c, store, version, http.StatusConflict, problem, false)
	}
}

// renderOperation loads the operation and renders its page or fragment.
func renderOperation(c echo.Context, store OperationReader, version string, status int, problem *views.Notice, fragment bool) error {
	id, err := parseOperationID(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	op, err := store.Operation(ctx, id)
	if errors.Is(err, dlq.ErrNotFound) {
		return NotFound("There is no operation %d.", id)
	}
	if err != nil {
		return err
	}
	var jobs []dlq.JobOutcome
	if op.Canary > 0 && op.Kind == dlq.OpReplay {
		if jobs, err = store.OperationJobs(ctx, op.ID, op.Canary); err != nil {
			return err
		}
	}
	skips, err := store.OperationSkips(ctx, op)
	if err != nil {
		return err
	}
	replays, err := replaysOf(ctx, store, op)
	if err != nil {
		return err
	}
	meta := Meta(c, fmt.Sprintf("%s operation %d", verbOf(op.Kind), op.ID), "operations", version)
	// The page says more of this operation than the banner, and live: a
	// banner naming it too would go stale above its own progress.
	meta.InFlight = bannerWithout(meta.InFlight, op.ID)
	v := operationView(op, jobs, skips, replays)
	v.CanAct, v.CSRFToken, v.Problem = meta.CanAct, meta.CSRFToken, problem
	c.Response().Header().Add("Vary", "HX-Request")
	if fragment {
		return Render(c, status, views.OperationProgress(v))
	}
	return Render(c, status, views.Layout(meta, views.OperationPage(v)))
}

// replaysOf is where a replay's jobs are: the counts the runner keeps in
// the operation's row (a second old at most), or counted now before the
// runner's first count. Nil for a discard.
func replaysOf(ctx context.Context, store OperationReader, op dlq.Operation) (*dlq.ReplayCounts, error) {
	if op.Kind != dlq.OpReplay {
		return nil, nil
	}
	if op.Replays != nil {
		return op.Replays, nil
	}
	c, err := store.OperationReplays(ctx, op.ID)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func verbOf(k dlq.OperationKind) string {
	if k == dlq.OpDiscard {
		return "Discard"
	}
	return "Replay"
}

// operationView maps an operation, its canary jobs, its skips and (for a
// replay) where its replays are to the page's view model.
func operationView(op dlq.Operation, jobs []dlq.JobOutcome, skips dlq.SkipCounts, replays *dlq.ReplayCounts) views.OperationView {
	handled := op.Done + op.Skipped
	if op.EnqueuedAt != nil || op.State == dlq.OpDone {
		handled = op.Matched // the closing count folds in letters that left the selection
	}
	v := views.OperationView{
		ID: op.ID, Kind: string(op.Kind), Verb: verbOf(op.Kind), State: string(op.State),
		Live: !op.State.Finished(), PollURL: fmt.Sprintf("/operations/%d/progress", op.ID),
		Actor: op.Actor, Reason: op.Reason, CreatedAt: op.CreatedAt, FinishedAt: op.FinishedAt,
		Matched: op.Matched, Handled: handled, MatchedText: views.Number(op.Matched), HandledText: views.Number(handled),
		Percent: percent(handled, op.Matched), MaxID: op.MaxID,
		Outcomes:         operationOutcomes(op, skips, replays),
		CanCancel:        !op.State.Finished() && op.State != dlq.OpSettling,
		CanResume:        op.State == dlq.OpAutoPaused,
		CanStopFollowing: op.State == dlq.OpSettling,
		LettersHref:      "/audit",
	}
	if replays != nil {
		v.Replays = replaysView(op, *replays)
	}
	if op.AuditEventID != nil {
		v.LettersHref = fmt.Sprintf("/audit/%d", *op.AuditEventID)
	}
	if op.Filter != nil {
		v.Selection, v.SelectionHref = filterWords(*op.Filter)
	} else {
		v.Selection = fmt.Sprintf("%d selected %s: %s", len(op.IDs), plural(len(op.IDs), "letter", "letters"), idList(op.IDs, 30))
	}
	v.Target = op.Target().Describe()
	if op.RatePerSecond != nil && op.PaceOrigin != nil {
		last := op.PaceOrigin.Add(time.Duration(float64(op.Matched) / *op.RatePerSecond * float64(time.Second)))
		v.Pace = fmt.Sprintf("%s per second: the replayed jobs' start times are spread, the last about %s.",
			trimFloat(*op.RatePerSecond), views.AbsTime(last))
	}
	if op.Error != nil {
		v.Error = *op.Error
	}
	v.Canary = canaryView(op, jobs)
	v.CanRelease = op.State == dlq.OpCanaryFailed || (v.Canary != nil && v.Canary.Verdict == "succeeded" && op.State == dlq.OpCanary)
	v.ReleaseLabel = "Release the rest"
	if op.State == dlq.OpCanaryFailed {
		v.ReleaseLabel = "Release anyway"
	}
	v.StateText = opStateText(op, v.Canary)
	v.StateKind = opStateKind(op, v.Canary)
	v.Why = operationWhy(op, replays)
	return v
}

// replaysView is the second phase of a replay: its jobs settling.
func replaysView(op dlq.Operation, c dlq.ReplayCounts) *views.ReplaysView {
	num := views.Number
	// The bar is of the replays known: the letters handed to the queue,
	// or the replays found when the count of them has run ahead.
	enqueued := max(op.Done-c.Refused, c.Total())
	r := &views.ReplaysView{Enqueued: enqueued, Settled: c.Settled(), EnqueuedText: num(enqueued), SettledText: num(c.Settled()),
		Percent: percent(c.Settled(), enqueued), Waiting: num(c.Waiting), Running: num(c.Running), Succeeded: num(c.Succeeded),
		DiedAgain: num(c.DiedAgain), DiedAgainN: c.DiedAgain}
	if op.DiedAgainPercent != nil {
		r.Guard = fmt.Sprintf("Died-again guard: pause if more than %s%% of the first %d replays to settle die again",
			trimFloat(*op.DiedAgainPercent), dlq.GuardSample)
		switch {
		case op.GuardVerdict == nil:
			r.Guard += fmt.Sprintf(" (watching; until it judges, at most %s replays are in flight).", num(dlq.GuardWindow))
		case *op.GuardVerdict == "passed":
			r.Guard += " (passed)."
		default:
			r.Guard += " (tripped)."
		}
	}
	return r
}

// operationWhy explains a state that waits for the operator, or an end
// before every replay settled.
func operationWhy(op dlq.Operation, c *dlq.ReplayCounts) string {
	switch {
	case op.State == dlq.OpAutoPaused && op.DiedAgainPercent != nil:
		return fmt.Sprintf("Paused by the died-again guard: more than %s%% of the first %d replays to settle died again, so nothing more is released. "+
			"Look at the new dead letters; then resume (the guard will not pause it again) or cancel the rest.",
			trimFloat(*op.DiedAgainPercent), dlq.GuardSample)
	case op.State == dlq.OpCanaryFailed:
		return "A canary replay died again, so nothing else was released. Look at the new dead letters below; then cancel, " +
			"or release the rest anyway."
	case op.State == dlq.OpSettling:
		return "Every letter is handed to the queue; the operation is done when each replay has succeeded or died again. " +
			"Stop following to end it now (the replays go on as any job does)."
	case op.State == dlq.OpDone && op.StoppedFollowingBy != nil && c != nil:
		return fmt.Sprintf("%s stopped following this operation before every replay had settled; the counts below are as the replays are now.",
			*op.StoppedFollowingBy)
	}
	return ""
}

// operationOutcomes lists an operation's counts per outcome. For explicit
// ids the skips are told apart (already replayed, discarded, not found);
// a filter selected pending letters only, so its skips are letters someone
// else replayed or discarded after the confirmation.
func operationOutcomes(op dlq.Operation, s dlq.SkipCounts, replays *dlq.ReplayCounts) []views.OutcomeItem {
	num := views.Number
	out := []views.OutcomeItem{{Key: string(op.Kind) + "ed", Label: pastTenseOf(op.Kind), N: num(op.Done), Kind: "ok"}}
	if op.Kind == dlq.OpDiscard {
		out[0].Key = "discarded"
	} else {
		// Handed to the queue is not yet replayed: what became of the
		// replays is the second bar's, in green only when they succeeded.
		out[0].Label, out[0].Kind = "enqueued for replay", "muted"
	}
	if replays != nil && replays.Refused > 0 {
		// Refused by the system they came from: pending again, never
		// counted as replayed.
		out[0].N = num(op.Done - replays.Refused)
		out = append(out, views.OutcomeItem{Key: "refused_by_source", N: num(replays.Refused), Kind: "warn",
			Label: "refused by the system they came from (pending again; each letter's history says why)"})
	}
	if op.Filter != nil {
		out = append(out, views.OutcomeItem{Key: "skipped", N: num(op.Skipped), Kind: "muted",
			Label: "skipped: replayed or discarded by someone else after the confirmation"})
	} else if op.Kind == dlq.OpReplay {
		out = append(out,
			views.OutcomeItem{Key: "already_replayed", Label: "already replayed", N: num(s.Replayed), Kind: "muted"},
			views.OutcomeItem{Key: "refused", Label: "refused: discarded (restore them first)", N: num(s.Discarded), Kind: "warn"})
	} else {
		out = append(out,
			views.OutcomeItem{Key: "already_discarded", Label: "already discarded", N: num(s.Discarded), Kind: "muted"},
			views.OutcomeItem{Key: "refused", Label: "refused: already replayed", N: num(s.Replayed), Kind: "warn"})
	}
	if op.Filter == nil {
		out = append(out, views.OutcomeItem{Key: "not_found", Label: "not found", N: num(s.NotFound), Kind: "muted"})
	}
	if left := op.Matched - op.Done - op.Skipped; left > 0 && op.State != dlq.OpDone {
		label := "still to do"
		if op.State.Finished() || op.State.Waiting() {
			label = "left alone (" + strings.ReplaceAll(string(op.State), "_", " ") + ")"
		}
		out = append(out, views.OutcomeItem{Key: "left", Label: label, N: num(left), Kind: "muted"})
	}
	return out
}

func pastTenseOf(k dlq.OperationKind) string {
	if k == dlq.OpDiscard {
		return "discarded"
	}
	return "replayed"
}

// canaryView judges a canary from its jobs: it succeeded when every job
// succeeded, died when any job is dead (it failed for good again), and is
// waiting otherwise. Nil when the operation has no canary.
func canaryView(op dlq.Operation, jobs []dlq.JobOutcome) *views.CanaryView {
	if op.Canary == 0 || op.Kind != dlq.OpReplay {
		return nil
	}
	c := &views.CanaryView{Size: op.Canary}
	var t canaryTally
	c.Jobs, t = canaryRows(jobs)
	c.Verdict, c.Message = canaryVerdict(op, t)
	return c
}

// canaryTally counts a canary's jobs by the states its verdict depends on.
type canaryTally struct {
	jobs, succeeded, dead, retrying int
}

// canaryRows lists a canary's jobs for the page, with links and the first
// line of each last error, and counts them by state for the verdict.
func canaryRows(jobs []dlq.JobOutcome) ([]views.CanaryJobRow, canaryTally) {
	var rows []views.CanaryJobRow
	t := canaryTally{jobs: len(jobs)}
	for _, j := range jobs {
		row := views.CanaryJobRow{LetterID: j.DeadLetterID, LetterHref: fmt.Sprintf("/dead-letters/%d", j.DeadLetterID),
			JobID: j.JobID, State: string(j.State), Attempt: j.Attempt, Source: j.Source}
		if j.Source == "" {
			row.JobHref = fmt.Sprintf("/jobs/%d", j.JobID)
		}
		if j.LastError != nil {
			row.LastError = firstLine(*j.LastError, 200)
		}
		rows = append(rows, row)
		switch j.State {
		case dlq.StateSucceeded:
			t.succeeded++
		case dlq.StateDead:
			t.dead++
		case dlq.StateRetrying:
			t.retrying++
		}
	}
	return rows, t
}

// canaryVerdict names how the canary went and says so to the engineer:
// one dead job outweighs any number that succeeded, because a replay that
// fails for good again means the fix did not work.
func canaryVerdict(op dlq.Operation, t canaryTally) (verdict, message string) {
	n := t.jobs
	switch {
	case t.dead > 0:
		return "died", canaryDiedMessage(op, t)
	case op.State == dlq.OpCanary && n > 0 && t.succeeded == n:
		return "succeeded", fmt.Sprintf("The canary succeeded: all %d %s ran. Release the rest when you are ready.", n, plural(n, "job", "jobs"))
	case op.State == dlq.OpCanary:
		return "waiting", canaryWaitingMessage(t)
	case n == 0 && op.State == dlq.OpRunning:
		return "starting", "Replaying the canary letters…"
	default:
		if op.State == dlq.OpCancelled && op.Done <= int64(op.Canary) {
			return "released", fmt.Sprintf("The operation was cancelled after its canary (%d of %d succeeded).", t.succeeded, n)
		}
		return "released", fmt.Sprintf("The canary ran (%d of %d succeeded) and the rest was released.", t.succeeded, n)
	}
}

// canaryDiedMessage tells what to do while the operation still waits at
// its dead canary; once it moved on (released anyway, cancelled) only the
// count is news.
func canaryDiedMessage(op dlq.Operation, t canaryTally) string {
	n := t.jobs
	if op.State != dlq.OpCanary && op.State != dlq.OpCanaryFailed {
		return fmt.Sprintf("%d of %d canary %s died again.", t.dead, n, plural(n, "job", "jobs"))
	}
	return fmt.Sprintf("Stopped: the canary died again — %d of %d canary %s failed for good. Nothing else was replayed. Cancel this operation, look at the new dead letters, and fix the cause first.",
		t.dead, n, plural(n, "job", "jobs"))
}

// canaryWaitingMessage reports a canary still running. Jobs that failed
// and are retrying are not dead yet, but they are the first sign that the
// fix did not work: say so before the retries run out.
func canaryWaitingMessage(t canaryTally) string {
	n := t.jobs
	if t.retrying > 0 {
		return fmt.Sprintf("Waiting for the canary: %d of %d %s succeeded so far, and %d failed again and %s retrying (see the last error below). The rest is replayed only when you release it.",
			t.succeeded, n, plural(n, "job", "jobs"), t.retrying, plural(t.retrying, "is", "are"))
	}
	return fmt.Sprintf("Waiting for the canary: %d of %d %s succeeded so far. The rest is replayed only when you release it.",
		t.succeeded, n, plural(n, "job", "jobs"))
}

// opStateText says where an operation is, in words.
func opStateText(op dlq.Operation, c *views.CanaryView) string {
	switch op.State {
	case dlq.OpRunning:
		if op.Kind == dlq.OpReplay {
			return "Running: handing letters to the queue"
		}
		return "Running"
	case dlq.OpSettling:
		return "Settling: replays still running"
	case dlq.OpCanaryFailed:
		return "Canary failed: waiting for a decision"
	case dlq.OpAutoPaused:
		return "Auto-paused: too many replays died again"
	case dlq.OpCanary:
		if c != nil && c.Verdict == "died" {
			return "Stopped: the canary died again"
		}
		if c != nil && c.Verdict == "succeeded" {
			return "Canary succeeded: waiting for release"
		}
		return "Canary running: waiting for its jobs"
	case dlq.OpDone:
		if op.StoppedFollowingBy != nil {
			return "Done: stopped following"
		}
		return "Done"
	case dlq.OpCancelled:
		return "Cancelled"
	case dlq.OpFailed:
		return "Failed"
	default:
		return string(op.State)
	}
}

// bannerWithout is b without the operation id, nil when nothing is left.
func bannerWithout(b *views.InFlightBanner, id int64) *views.InFlightBanner {
	if b == nil {
		return nil
	}
	rest := &views.InFlightBanner{More: b.More}
	for _, n := range b.Operations {
		if n.ID != id {
			rest.Operations = append(rest.Operations, n)
		}
	}
	if len(rest.Operations) == 0 && rest.More == 0 {
		return nil
	}
	return rest
}

// opStateShort is opStateText's first words ("Running", "Settling"), for
// where the state is named inside a sentence.
func opStateShort(op dlq.Operation) string {
	t := opStateText(op, nil)
	if i := strings.Index(t, ":"); i > 0 {
		return t[:i]
	}
	return t
}

func opStateKind(op dlq.Operation, c *views.CanaryView) string {
	switch {
	case op.State == dlq.OpDone:
		return "ok"
	case op.State == dlq.OpFailed || op.State == dlq.OpCanaryFailed || op.State == dlq.OpAutoPaused ||
		(c != nil && c.Verdict == "died" && op.State == dlq.OpCanary):
		return "error"
	case op.State == dlq.OpCancelled || op.State == dlq.OpCanary:
		return "warn"
	default:
		return "running"
	}
}

func percent(part, whole int64) string {
	if whole <= 0 {
		return "100%"
	}
	return fmt.Sprintf("%d%%", part*100/whole)
}

func trimFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
