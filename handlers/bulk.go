package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// Bulk replay and discard from the list: the rows ticked, or every letter
// the filter matches, go to a confirmation page that changes nothing; its
// form starts a durable operation (StartBulk) and redirects to the page
// that follows it. The selection is bounded at the confirmation by the
// highest id that matched then (MaxID), so letters that die while the
// engineer reads the page are not swept in.

// BulkService is what the bulk pages need (replay.Service).
type BulkService interface {
	Preview(ctx context.Context, sel dlq.Selection, sampleSize int) (dlq.Preview, error)
	StartBulk(ctx context.Context, r replay.BulkRequest) (dlq.Operation, error)
	SelectionVersionWarning(ctx context.Context, newest []dlq.DeadLetter, staleAfter time.Duration) (string, error)
}

// bulkSampleSize is how many letters the confirmation page shows.
const bulkSampleSize = 10

// bulkForm is what the list's bulk form and the confirmation form carry.
type bulkForm struct {
	kind        dlq.OperationKind
	sel         dlq.Selection
	allMatching bool
	filter      dlq.Filter // when allMatching
	// The confirmation form's choices, as typed.
	rate, canarySize, typed, reason, key string
	canaryOn                             bool
	// diedAgain is the died-again guard's percentage ("": none).
	diedAgain string
	// target is where, from when and with how many attempts a replay runs.
	target targetForm
	// fresh is a first showing of the confirmation: the safe defaults
	// apply (safeDefaults); a form sent back keeps what the operator chose.
	fresh bool
}

// Above safeDefaultsOver letters, a replay's confirmation starts with a
// canary of safeCanary letters, a pace of safePace per second and the
// died-again guard filled in: a mistake then costs ten letters and a stop,
// not the whole backlog at once. The operator can change or clear each.
//
// A replay of whole error groups (the group page's "Replay this group", an
// incident's groups) gets them above groupSafeDefaultsOver already: a
// group is one failure repeated, so unless its fix is live every letter of
// it dies again the same way, and ten letters are enough to tell. A group
// of twenty or fewer is over about as soon as a canary would be.
const (
	safeDefaultsOver      = 1000
	groupSafeDefaultsOver = 20
	safeCanary            = "10"
	safePace              = "50"
)

// safeDefaults fills in the canary, pace and guard of a fresh, large
// replay.
func safeDefaults(b *bulkForm, matched int64) {
	if !b.fresh || b.kind != dlq.OpReplay || matched <= safeDefaultsAbove(*b) {
		return
	}
	b.canaryOn, b.canarySize = true, safeCanary
	if b.rate == "" {
		b.rate = safePace
	}
	if b.diedAgain == "" {
		b.diedAgain = strconv.FormatFloat(dlq.DefaultDiedAgainPercent, 'f', -1, 64)
	}
}

// safeDefaultsAbove is how many letters a replay may hold before its
// confirmation starts with the safe defaults.
func safeDefaultsAbove(b bulkForm) int64 {
	if b.allMatching && len(b.filter.Groups()) > 0 {
		return groupSafeDefaultsOver
	}
	return safeDefaultsOver
}

// parseBulkForm reads the action and the selection: a filter when "all
// matching" is ticked (then ticked rows are only a subset of it), else the
// ticked ids.
func parseBulkForm(c echo.Context, masker mask.Policy, now time.Time) (bulkForm, error) {
	form, err := c.FormParams()
	if err != nil {
		return bulkForm{}, BadRequest("invalid_form", "The form could not be read: %v", err)
	}
	b := bulkForm{kind: dlq.OperationKind(form.Get("action")), key: form.Get("key"),
		rate: form.Get("rate_per_second"), canarySize: form.Get("canary_size"), typed: form.Get("typed"),
		reason: form.Get("reason"), canaryOn: form.Get("canary") == "on", diedAgain: strings.TrimSpace(form.Get("died_again_percent")),
		target: targetForm{Queue: strings.TrimSpace(form.Get("queue")), StartAt: strings.TrimSpace(form.Get("start_at")),
			MaxAttempts: strings.TrimSpace(form.Get("max_attempts"))}}
	if b.kind != dlq.OpReplay && b.kind != dlq.OpDiscard {
		return bulkForm{}, BadRequest("invalid_action", "Choose replay or discard.")
	}
	if form.Get("all_matching") == "1" {
		q, err := url.ParseQuery(form.Get("filter"))
		if err != nil {
			return bulkForm{}, BadRequest("invalid_filter", "The filter of this form could not be read; go back to the list and try again.")
		}
		f, err := ParseFilter(q, now)
		if err == nil {
			err = maskedSearch(f, masker, "q")
		}
		if err != nil {
			return bulkForm{}, err
		}
		b.allMatching, b.filter, b.sel.Filter = true, f, &f
	} else {
		if b.sel.IDs, err = selectedIDs(form["id"], "Letter",
			"Nothing was selected: tick some letters, or “Select all … matching this filter”, then choose replay or discard."); err != nil {
			return bulkForm{}, err
		}
	}
	if b.sel.MaxID, err = formBound(form.Get("max_id")); err != nil {
		return bulkForm{}, err
	}
	return b, nil
}

// selectedIDs reads the ids ticked on a bulk form: positive, sorted, each
// once. what names them in the refusal ("Letter", "Job"); empty is the
// refusal when none is ticked.
func selectedIDs(raw []string, what, empty string) ([]int64, error) {
	var ids []int64
	for _, s := range raw {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return nil, BadRequest("invalid_id", "%s ids are positive whole numbers; %q is not.", what, s)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return nil, BadRequest("empty_selection", "%s", empty)
	}
	return ids, nil
}

// formBound reads a bulk form's max_id, the highest id its count covered;
// zero when the form has none.
func formBound(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, BadRequest("invalid_bound", "The form's bound is damaged; go back to the list and try again.")
	}
	return n, nil
}

// BulkConfirmPage renders the confirmation of a bulk action (GET or POST
// /dead-letters/bulk). It changes nothing.
func BulkConfirmPage(svc BulkService, masker mask.Policy, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAct(c); err != nil {
			return err
		}
		b, err := parseBulkForm(c, masker, now())
		if err != nil {
			return err
		}
		b.canarySize = "5"
		b.fresh = true
		return renderConfirm(c, svc, b, http.StatusOK, nil, version)
	}
}

// BulkConfirm starts the operation the confirmation page described (POST
// /dead-letters/bulk/confirm) and redirects to the page that follows it.
// A problem (no reason for a discard, the wrong typed number, a bad pace)
// shows the confirmation again with the problem named; nothing started.
func BulkConfirm(svc BulkService, masker mask.Policy, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := parseBulkForm(c, masker, now())
		if err != nil {
			return err
		}
		if b.sel.MaxID == 0 {
			return BadRequest("invalid_bound", "This confirmation has no bound; go back to the list and select again.")
		}
		r, problems := bulkRequest(b, ActorFrom(c))
		if len(problems) == 0 {
			op, err := svc.StartBulk(c.Request().Context(), r)
			if err == nil {
				return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/operations/%d", op.ID))
			}
			if problems, err = startProblems(err, b.typed); err != nil {
				return err
			}
		}
		return renderConfirm(c, svc, b, http.StatusBadRequest, problems, version)
	}
}

// bulkRequest turns the confirmation form into the request for StartBulk,
// with a problem for each of the pace, canary and died-again fields that
// is not a number of the right kind (a canary also needs one letter at
// least); the service checks the other bounds.
func bulkRequest(b bulkForm, actor replay.Actor) (replay.BulkRequest, map[string]string) {
	r := replay.BulkRequest{Kind: b.kind, Selection: b.sel, Actor: actor, Reason: b.reason,
		RequireTyped: true, Typed: b.typed, Key: b.key}
	problems := map[string]string{}
	var err error
	if b.rate != "" {
		if r.RatePerSecond, err = strconv.ParseFloat(b.rate, 64); err != nil {
			problems["rate_per_second"] = "The pace must be a number of letters per second, like 50 or 0.5."
		}
	}
	if b.canaryOn {
		if r.Canary, err = strconv.Atoi(b.canarySize); err != nil || r.Canary < 1 {
			problems["canary"] = "The canary must replay a whole number of letters, at least 1."
		}
	}
	if b.diedAgain != "" && b.kind == dlq.OpReplay {
		if r.DiedAgainPercent, err = strconv.ParseFloat(strings.TrimSuffix(b.diedAgain, "%"), 64); err != nil {
			problems["died_again_percent"] = "The died-again threshold must be a percentage, like 20 (or empty: no guard)."
		}
	}
	if b.kind == dlq.OpReplay {
		var targetProblems map[string]string
		r.Target, targetProblems = parseTarget(b.target)
		for k, v := range targetProblems {
			problems[k] = bulkProblem(k, v)
		}
	}
	return r, problems
}

// startProblems words StartBulk's refusals for the confirmation page,
// field by field, so that the operator can correct the form; any other
// error is returned as it is, for the error handler.
func startProblems(err error, typed string) (map[string]string, error) {
	problems := map[string]string{}
	var ve *dlq.ValidationError
	var ce *replay.ConfirmError
	switch {
	case errors.As(err, &ve):
		for k, v := range ve.Fields {
			problems[k] = bulkProblem(k, v)
		}
	case errors.As(err, &ce):
		problems["typed"] = fmt.Sprintf("Type the number %d exactly to confirm; “%s” is not it.", ce.Expected, typed)
	default:
		return nil, err
	}
	return problems, nil
}

// bulkProblem words a field problem of StartBulk for the confirmation page.
func bulkProblem(field, msg string) string {
	switch field {
	case "reason":
		if strings.Contains(msg, "required") {
			return "A reason is required to discard: the next person will ask why these letters were dropped."
		}
		return "The reason " + msg + "."
	case "rate_per_second":
		return "The pace " + msg + "."
	case "canary":
		return "The canary size " + msg + "."
	case "died_again_percent":
		return "The died-again threshold " + msg + "."
	case "queue":
		return "The queue: " + msg + "."
	case "start_at":
		return "The start time: " + msg + "."
	case "max_attempts":
		return "Max attempts: " + msg + "."
	default:
		return field + ": " + msg
	}
}

// renderConfirm previews the selection (with the bound the form carries,
// or a new one) and renders the confirmation page.
func renderConfirm(c echo.Context, svc BulkService, b bulkForm, status int, problems map[string]string, version string) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	p, err := svc.Preview(ctx, b.sel, bulkSampleSize)
	if err != nil {
		return err
	}
	safeDefaults(&b, p.Matched)
	verb := "Replay"
	if b.kind == dlq.OpDiscard {
		verb = "Discard"
	}
	meta := Meta(c, verb+" dead letters", "dead-letters", version)
	v := views.BulkConfirmView{
		Action: string(b.kind), Verb: verb, CSRFToken: meta.CSRFToken, Key: newFormKey(),
		AllMatching: b.allMatching, IDs: b.sel.IDs, MaxID: p.MaxID,
		Matched: p.Matched, MatchedText: views.Number(p.Matched), Skipped: p.Other, SkippedText: views.Number(p.Other),
		NeedTyped: p.Matched > replay.TypedConfirmationOver, Typed: b.typed, Rate: b.rate,
		CanaryOn: b.canaryOn, CanarySize: b.canarySize, Reason: b.reason, Problems: problems, DiedAgain: b.diedAgain,
		Target:   views.ReplayTargetView{Queue: b.target.Queue, StartAt: b.target.StartAt, MaxAttempts: b.target.MaxAttempts, Problems: problems},
		BackHref: "/dead-letters", ByTaskCut: len(p.ByTask) == 20,
	}
	if b.allMatching {
		q := selectionQuery(b.filter)
		v.FilterQuery = q
		v.Selection = selectionWords(b.filter.FirstPage().Values())
		v.SelectionHref = "/dead-letters?" + q
		v.BackHref = v.SelectionHref
	} else {
		v.Selection = fmt.Sprintf("the %s %s you ticked", views.Number(int64(len(b.sel.IDs))), plural(len(b.sel.IDs), "letter", "letters"))
		v.NotFound = max(0, int64(len(b.sel.IDs))-p.Matched-p.Other)
	}
	for _, t := range p.ByTask {
		v.ByTask = append(v.ByTask, views.TaskCountRow{Task: t.Task, N: views.Number(t.N)})
	}
	for _, o := range p.Overlaps {
		v.Overlaps = append(v.Overlaps, views.OverlapNotice{ID: o.Operation.ID, Href: fmt.Sprintf("/operations/%d", o.Operation.ID),
			Kind: string(o.Operation.Kind), Actor: o.Operation.Actor, State: strings.ToLower(opStateShort(o.Operation)),
			Letters: views.Number(o.Letters)})
	}
	v.Sample = letterResults(dlq.Filter{}, dlq.DeadLetterPage{Letters: p.Sample}, dlq.Count{}).Rows
	v.GuardNeverJudges = b.kind == dlq.OpReplay && b.diedAgain != "" && p.Matched < dlq.GuardSample
	if b.kind == dlq.OpReplay && p.Matched > 0 {
		// A warning that cannot be computed is not worth failing the page.
		if w, err := svc.SelectionVersionWarning(ctx, p.Sample, versionStaleAfter); err == nil {
			v.VersionWarning = w
		}
	}
	return Render(c, status, views.Layout(meta, views.BulkConfirm(v)))
}

// selectionQuery is a filter as a bulk form carries it: pinned
// (dlq.Filter.Pinned), as the operation will store it.
func selectionQuery(f dlq.Filter) string {
	return f.Pinned().Encode()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
