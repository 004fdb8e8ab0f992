package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// Merging and splitting error groups by hand (issue 27), on the page
// /groups/{fingerprint}/edit and in the API. Both need the operator role
// (the access rules refuse other roles first; the handlers check again);
// the store validates, audits and makes each change in one transaction,
// and a repeated request changes nothing and answers as the first did.

// GroupEditReader is what the page that merges and splits a group reads:
// reads.Masked, so that what it shows of letters is masked.
type GroupEditReader interface {
	GroupEdit(ctx context.Context, fingerprint string) (dlq.GroupEdit, error)
	GroupSurvivor(ctx context.Context, id string) (string, bool, error)
}

// GroupEditor makes an operator's changes to groups (store/groups).
type GroupEditor interface {
	MergeErrorGroups(ctx context.Context, p dlq.GroupMergeParams) (dlq.GroupMergeResult, error)
	SplitErrorGroup(ctx context.Context, p dlq.GroupSplitParams) (dlq.GroupSplitResult, error)
	UnmergeErrorGroup(ctx context.Context, p dlq.GroupUnmergeParams) (dlq.GroupUnmergeResult, error)
}

// GroupEditHref is the page that merges and splits the group fingerprint.
func GroupEditHref(fingerprint string) string { return GroupHref(fingerprint) + "/edit" }

// mayEditGroups refuses a requester who may not merge or split groups.
func mayEditGroups(c echo.Context) error {
	if ActorFrom(c).Role.CanAct() {
		return nil
	}
	return dlq.Errorf(dlq.EForbidden, "You may not do this: merging and splitting error groups need the operator or admin role")
}

// editForms are the page's forms as sent, when one comes back with its
// problems.
type editForms struct {
	merge   views.GroupMergeForm
	split   views.GroupSplitForm
	unmerge views.GroupUnmergeForm
}

// GroupEditPage renders GET /groups/{fingerprint}/edit. A group merged
// into another leads to the survivor's page.
func GroupEditPage(store GroupEditReader, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		return renderGroupEdit(c, store, version, c.Param("fingerprint"), editForms{split: views.GroupSplitForm{Position: -1}},
			http.StatusOK, editDoneFlash(c.QueryParam("done"), c.QueryParam("n")))
	}
}

func renderGroupEdit(c echo.Context, store GroupEditReader, version, fp string, forms editForms, status int, flash *views.Flash) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	e, err := store.GroupEdit(ctx, fp)
	if errors.Is(err, dlq.ErrNotFound) && status == http.StatusOK {
		if into, merged, serr := store.GroupSurvivor(ctx, fp); serr == nil && merged {
			return c.Redirect(http.StatusFound, GroupEditHref(into))
		}
	}
	if err != nil {
		return err
	}
	meta := Meta(c, "Merge or split "+e.Group.ErrorClass+" in "+e.Group.Task, "groups", version)
	meta.Flash = flash
	v := groupEditView(e)
	v.CanAct, v.CSRFToken = meta.CanAct, meta.CSRFToken
	v.Merge, v.Split, v.Unmerge = forms.merge, forms.split, forms.unmerge
	return Render(c, status, views.Layout(meta, views.GroupEdit(v)))
}

// groupEditView maps what the store read to the page.
func groupEditView(e dlq.GroupEdit) views.GroupEditView {
	g := e.Group
	v := views.GroupEditView{Fingerprint: g.Fingerprint, Task: g.Task, ErrorClass: g.ErrorClass, Message: g.SampleMessage,
		GroupHref: GroupHref(g.Fingerprint), Pending: views.Number(g.Pending), Total: views.Number(g.Total),
		FirstSeen: g.FirstSeen, LastSeen: g.LastSeen,
		Read: views.Number(int64(e.Read)), Unfit: e.Unfit, OthersCut: len(e.Others) >= dlq.MaxEditOthers}
	// The template's variables are numbered as the page names them.
	parts := map[int]int{}
	for i, ev := range e.Variables {
		parts[ev.Position] = i + 1
	}
	if e.HasTemplate {
		for i, tok := range e.Template.Tokens {
			v.Template = append(v.Template, views.TemplateWord{Text: tok, Variable: parts[i] > 0, Part: parts[i]})
		}
	}
	for _, o := range e.Others {
		v.Others = append(v.Others, views.GroupEditOther{Fingerprint: o.Fingerprint, Href: GroupHref(o.Fingerprint),
			Template: o.Template, Message: o.SampleMessage, Pending: views.Number(o.Pending), Total: views.Number(o.Total),
			FirstSeen: o.FirstSeen, LastSeen: o.LastSeen, Older: e.HasTemplate && o.Seq < e.Template.Seq})
	}
	for _, ev := range e.Variables {
		pv := views.GroupEditVariable{Position: ev.Position, Part: parts[ev.Position], NotSplittable: ev.NotSplittable, More: ev.Distinct - len(ev.Words)}
		if ev.Position > 0 {
			pv.After = e.Template.Tokens[ev.Position-1]
		}
		for i, w := range ev.Words {
			pv.Words = append(pv.Words, views.GroupEditWord{Text: w.Text, Letters: views.Number(int64(w.Letters)),
				Data: w.Data, Keeps: i == 0})
		}
		v.Variables = append(v.Variables, pv)
	}
	for _, m := range e.Merged {
		v.Merged = append(v.Merged, views.GroupEditMerged{Fingerprint: m.ID, Template: m.Template, Actor: m.Actor, MergedAt: m.MergedAt})
	}
	for _, s := range e.Splits {
		row := views.GroupEditSplit{Source: s.Source, SourceHref: GroupEditHref(s.Source), Word: s.Word,
			Group: s.Group, GroupHref: GroupEditHref(s.Group), Letters: views.Number(s.Letters), Actor: s.Actor, At: s.At}
		// The split word is this group's; the word before it names it.
		if e.HasTemplate && s.Position > 0 && s.Position <= len(e.Template.Tokens) {
			row.After = e.Template.Tokens[s.Position-1]
		}
		if s.Source == g.Fingerprint {
			v.SplitInto = append(v.SplitInto, row)
		} else {
			v.SplitFrom = append(v.SplitFrom, row)
		}
	}
	return v
}

// editDoneFlash says what the change a page was redirected from did.
func editDoneFlash(done, n string) *views.Flash {
	count, err := strconv.Atoi(n)
	if err != nil || count < 0 || count > dlq.MaxMergeGroups+dlq.MaxSplitParts {
		count = 0
	}
	const follow = " Workers follow within 10 seconds; the audit trail has it."
	switch done {
	case "merged":
		return &views.Flash{Kind: "ok", Message: "Merged " + strconv.Itoa(count) + " " + pluralWord(count, "group", "groups") + " into this one." + follow}
	case "split":
		return &views.Flash{Kind: "ok", Message: "Split this group in " + strconv.Itoa(count) + ": the most common word kept it, each other word has a group of its own, listed below." + follow}
	case "unmerged":
		return &views.Flash{Kind: "ok", Message: "Split the group off again: its letters are back in it." + follow}
	}
	return nil
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// doneHref is the edit page of fingerprint after a change.
func doneHref(fingerprint, done string, n int) string {
	return GroupEditHref(fingerprint) + "?" + url.Values{"done": {done}, "n": {strconv.Itoa(n)}}.Encode()
}

// editProblem re-renders the page with a refused form (422), or returns
// err when it is no refusal of the input.
func editProblem(c echo.Context, store GroupEditReader, version string, forms editForms, verb string, err error) error {
	var ve *dlq.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	switch {
	case forms.split.Position >= 0:
		forms.split.Problems = ve.Fields
	case forms.unmerge.Group != "":
		forms.unmerge.Problems = ve.Fields
	default:
		forms.merge.Problems = ve.Fields
	}
	return renderGroupEdit(c, store, version, c.Param("fingerprint"), forms, http.StatusUnprocessableEntity,
		&views.Flash{Kind: "error", Message: "Nothing was " + verb + ": " + joinProblems(ve.Fields) + "."})
}

// GroupMergeForm handles the merge form: 303 to the survivor's page, or
// the page again with the problem (422).
func GroupMergeForm(editor GroupEditor, store GroupEditReader, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayEditGroups(c); err != nil {
			return err
		}
		form, err := c.FormParams()
		if err != nil {
			return BadRequest("invalid_form", "could not read the form: %v", err)
		}
		f := views.GroupMergeForm{Selected: map[string]bool{}, Survivor: formText(c, "survivor"), Reason: formText(c, "reason")}
		for _, id := range form["groups"] {
			f.Selected[id] = true
		}
		res, err := editor.MergeErrorGroups(c.Request().Context(), dlq.GroupMergeParams{Group: c.Param("fingerprint"),
			Groups: form["groups"], Survivor: f.Survivor, Actor: ActorFrom(c).Actor, Reason: f.Reason})
		if err != nil {
			return editProblem(c, store, version, editForms{merge: f, split: views.GroupSplitForm{Position: -1}}, "merged", err)
		}
		return c.Redirect(http.StatusSeeOther, doneHref(res.Survivor, "merged", len(res.Merged)))
	}
}

// GroupSplitForm handles a split form: 303 to the group's page listing
// the parts, or the page again with the problem (422).
func GroupSplitForm(editor GroupEditor, store GroupEditReader, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayEditGroups(c); err != nil {
			return err
		}
		pos, err := strconv.Atoi(formText(c, "position"))
		if err != nil || pos < 0 {
			return BadRequest("invalid_form", "position must be the position of a variable of the template, a whole number")
		}
		f := views.GroupSplitForm{Position: pos, Reason: formText(c, "reason")}
		res, err := editor.SplitErrorGroup(c.Request().Context(), dlq.GroupSplitParams{Group: c.Param("fingerprint"),
			Position: pos, Actor: ActorFrom(c).Actor, Reason: f.Reason})
		if err != nil {
			return editProblem(c, store, version, editForms{split: f}, "split", err)
		}
		return c.Redirect(http.StatusSeeOther, doneHref(res.Group, "split", len(res.Parts)))
	}
}

// GroupUnmergeForm handles a "split it off again" form: 303 to the page
// of the group split off, or the page again with the problem (422).
func GroupUnmergeForm(editor GroupEditor, store GroupEditReader, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayEditGroups(c); err != nil {
			return err
		}
		f := views.GroupUnmergeForm{Group: formText(c, "group"), Reason: formText(c, "reason")}
		res, err := editor.UnmergeErrorGroup(c.Request().Context(), dlq.GroupUnmergeParams{Group: c.Param("fingerprint"),
			From: f.Group, Actor: ActorFrom(c).Actor, Reason: f.Reason})
		if err != nil {
			return editProblem(c, store, version, editForms{unmerge: f, split: views.GroupSplitForm{Position: -1}}, "split off", err)
		}
		return c.Redirect(http.StatusSeeOther, doneHref(res.Group, "unmerged", 1))
	}
}

// APIGroupMerge answers POST /api/v1/groups/{fingerprint}/merge with
// {"groups": [...], "survivor": "...", "reason": "..."}: 200 with the
// survivor, the ids merged and its template, the same for a repeat.
func APIGroupMerge(editor GroupEditor) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayEditGroups(c); err != nil {
			return err
		}
		var b struct {
			Groups   []string `json:"groups"`
			Survivor string   `json:"survivor"`
			Reason   string   `json:"reason"`
		}
		if err := decodeJSON(c, &b, "groups, survivor, reason"); err != nil {
			return err
		}
		res, err := editor.MergeErrorGroups(c.Request().Context(), dlq.GroupMergeParams{Group: c.Param("fingerprint"),
			Groups: b.Groups, Survivor: b.Survivor, Actor: ActorFrom(c).Actor, Reason: b.Reason})
		if err != nil {
			return err
		}
		if res.Merged == nil {
			res.Merged = []string{}
		}
		return c.JSON(http.StatusOK, res)
	}
}

// APIGroupSplit answers POST /api/v1/groups/{fingerprint}/split with
// {"position": n, "reason": "..."}: 200 with the parts, the kept one
// first, the same for a repeat.
func APIGroupSplit(editor GroupEditor) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayEditGroups(c); err != nil {
			return err
		}
		var b struct {
			Position *int   `json:"position"`
			Reason   string `json:"reason"`
		}
		if err := decodeJSON(c, &b, "position, reason"); err != nil {
			return err
		}
		if b.Position == nil {
			return &dlq.ValidationError{Fields: map[string]string{"position": "say which part to split by: the position of a <*> in the group's template, counted from 0"}}
		}
		res, err := editor.SplitErrorGroup(c.Request().Context(), dlq.GroupSplitParams{Group: c.Param("fingerprint"),
			Position: *b.Position, Actor: ActorFrom(c).Actor, Reason: b.Reason})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
}

// APIGroupUnmerge answers POST /api/v1/groups/{fingerprint}/unmerge with
// {"group": id, "reason": "..."}: 200 once the group merged into this one
// is split off again, the same for a repeat.
func APIGroupUnmerge(editor GroupEditor) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayEditGroups(c); err != nil {
			return err
		}
		var b struct {
			Group  string `json:"group"`
			Reason string `json:"reason"`
		}
		if err := decodeJSON(c, &b, "group, reason"); err != nil {
			return err
		}
		res, err := editor.UnmergeErrorGroup(c.Request().Context(), dlq.GroupUnmergeParams{Group: c.Param("fingerprint"),
			From: b.Group, Actor: ActorFrom(c).Actor, Reason: b.Reason})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	}
}
