package handlers_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// The groups of groupsFixture: group ids are 16 hex digits.
const (
	fpOld = "00000000000000a1"
	fpNew = "00000000000000a2"
	fpHot = "00000000000000a3"
)

// groupsFixture: an old backlog (fpOld, 40 letters 3 days ago), a group
// first seen 13 minutes ago (fpNew, 12 letters), and a group that has
// always run and spikes now (fpHot: 14 letters over 13 days, 30 in the
// last hour).
func groupsFixture(t *testing.T) console {
	c := newConsole(t)
	c.insertLetters(t, 40, "billing.charge", fpOld, "3 days")
	for _, ago := range []string{"2 days", "3 days", "4 days", "5 days", "6 days", "7 days", "8 days",
		"9 days", "10 days", "11 days", "12 days", "13 days", "13 days", "13 days"} {
		c.insertLetters(t, 1, "email.send", fpHot, ago)
	}
	c.insertLetters(t, 30, "email.send", fpHot, "5 minutes")
	c.insertLetters(t, 12, "reports.build", fpNew, "13 minutes")
	c.exec(t, `UPDATE dead_letter_records SET traceback_template = NULL, traceback = 'Traceback: charge failed for order ' || id WHERE fingerprint = $1`, fpNew)
	// Three failures, not one incident across three tasks: each group
	// its own message (insertLetters writes one for all).
	for fp, msg := range map[string]string{fpOld: "ledger locked by posting ", fpHot: "mailbox full for recipient "} {
		c.exec(t, `UPDATE dead_letter_records SET error_message = $2 || id WHERE fingerprint = $1`, fp, msg)
		c.exec(t, `UPDATE error_groups SET sample_message = $2 || '1' WHERE fingerprint = $1`, fp, msg)
	}
	return c
}

func TestGroupPage(t *testing.T) {
	t.Parallel()
	c := groupsFixture(t)

	rec, doc := c.page(t, "/groups/"+fpNew)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %.300s", rec.Code, rec.Body)
	}
	for id, want := range map[string]string{
		"group-title": "ChargeError in reports.build new", "group-pending": "12", "group-total": "12", "group-last-hour": "12",
	} {
		if got := squash(byTestID(doc.Selection, id)); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if got := squash(byTestID(doc.Selection, "group-message")); !strings.HasPrefix(got, "card declined for order") {
		t.Errorf("sample message %q", got)
	}
	if got := squash(byTestID(doc.Selection, "group-traceback")); !strings.HasPrefix(got, "Traceback: charge failed") {
		t.Errorf("traceback %q", got)
	}
	if n := byTestID(doc.Selection, "letter-row").Length(); n != 12 {
		t.Errorf("%d letter rows, want 12", n)
	}
	for _, id := range []string{"group-hourly", "group-daily"} {
		if byTestID(doc.Selection, id).Length() != 1 {
			t.Errorf("no %s chart", id)
		}
	}
	// Replay this group leads to the bulk confirmation of exactly this
	// group's pending letters.
	href := byTestID(doc.Selection, "group-replay").AttrOr("href", "")
	rec, confirm := c.page(t, href)
	if rec.Code != http.StatusOK {
		t.Fatalf("replay this group %q: %d %.300s", href, rec.Code, rec.Body)
	}
	if got := squash(byTestID(confirm.Selection, "confirm-count")); got != "12" {
		t.Errorf("confirmation count %q, want 12", got)
	}
	if !strings.Contains(byTestID(doc.Selection, "group-discard").AttrOr("href", ""), "action=discard") {
		t.Error("no discard link")
	}

	if rec, _ := c.page(t, "/groups/no-such-group"); rec.Code != http.StatusNotFound {
		t.Errorf("unknown group: %d, want 404", rec.Code)
	}
}

func TestGroupsNewAndSpiking(t *testing.T) {
	t.Parallel()
	c := groupsFixture(t)

	order := func(t *testing.T, path, testid string) []string {
		t.Helper()
		rec, doc := c.page(t, path)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", path, rec.Code, rec.Body)
		}
		var got []string
		byTestID(doc.Selection, testid).Each(func(_ int, s *goquery.Selection) {
			h := s.Find(`a[href^="/groups/"]`).First().AttrOr("href", "")
			marks := squash(s.Find(`[data-testid^="mark-"]`))
			got = append(got, strings.TrimPrefix(h, "/groups/")+"|"+marks)
		})
		return got
	}
	for path, want := range map[string]string{
		"/groups":                           fpHot + "|spiking " + fpOld + "| " + fpNew + "|new",
		"/groups?sort=newest":               fpNew + "|new " + fpOld + "| " + fpHot + "|spiking",
		"/groups?sort=last_hour":            fpHot + "|spiking " + fpNew + "|new " + fpOld + "|",
		"/?sort=newest":                     fpNew + "|new " + fpOld + "| " + fpHot + "|spiking",
		"/overview/fragment?sort=last_hour": fpHot + "|spiking " + fpNew + "|new " + fpOld + "|",
	} {
		testid := "group-row"
		if strings.HasPrefix(path, "/?") || strings.HasPrefix(path, "/overview") {
			testid = "top-group"
		}
		if got := strings.Join(order(t, path, testid), " "); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}

	// Pages of groups: 2 a page, 3 groups.
	_, doc := c.page(t, "/groups?limit=2")
	next := byTestID(doc.Selection, "groups-next").AttrOr("href", "")
	if next == "" || byTestID(doc.Selection, "groups-prev").Length() != 0 {
		t.Fatalf("page 1 of 2: next %q", next)
	}
	_, doc = c.page(t, next)
	if n := byTestID(doc.Selection, "group-row").Length(); n != 1 || byTestID(doc.Selection, "groups-next").Length() != 0 {
		t.Fatalf("page 2: %d rows", n)
	}
	if rec, _ := c.page(t, "/groups?page=0"); rec.Code != http.StatusBadRequest {
		t.Errorf("page 0: %d, want 400", rec.Code)
	}
	// The API knows the new orders and the last hour.
	rec := c.do(t, http.MethodGet, "/api/v1/groups?sort=newest&"+url.Values{"limit": {"1"}}.Encode(), "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"fingerprint":"`+fpNew+`"`) || !strings.Contains(rec.Body.String(), `"last_hour":12`) {
		t.Errorf("api newest: %d %.300s", rec.Code, rec.Body)
	}
}

// TestGroupPageOfAMergedGroup: a group merged into another redirects to the
// survivor, whose page holds both groups' letters.
func TestGroupPageOfAMergedGroup(t *testing.T) {
	t.Parallel()
	c := groupsFixture(t)
	c.exec(t, `SELECT error_group_move(ARRAY[$1], $2, 'system')`, fpNew, fpOld)
	rec := c.do(t, http.MethodGet, "/groups/"+fpNew, "")
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "/groups/"+fpOld {
		t.Fatalf("status %d, Location %q; want 302 to /groups/%s", rec.Code, rec.Header().Get("Location"), fpOld)
	}
	_, doc := c.page(t, "/groups/"+fpOld)
	if got := squash(byTestID(doc.Selection, "group-total")); got != "52" {
		t.Errorf("survivor's total %q, want 52", got)
	}
	if rec := c.do(t, http.MethodGet, "/groups/00000000000000a9", ""); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown group: status %d, want 404", rec.Code)
	}
}

// cardLetter is a letter of the declined-card failure TestGroupPageShowsWhatVaries
// reads: the card number is in its kwargs under a masked key, and in its
// message.
func cardLetter(fp, card, host, customer string) storetest.Letter {
	return storetest.Letter{Task: "payments.charge", ErrorClass: "CardError", Fingerprint: fp,
		Kwargs:  fmt.Sprintf(`{"card_number": %q}`, card),
		Message: fmt.Sprintf("card %s declined at host %s for customer %s", card, host, customer)}
}

// TestGroupPageShowsWhatVaries: the page leads with the group's template,
// its variables marked, and tells for each variable how many values the
// letters gave it and the most common ones, masked as the letter page
// masks them, each a search of the group's letters.
func TestGroupPageShowsWhatVaries(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	const card, otherCard = "4242424242424242", "5555555555554444"
	// The template the grouper learns from these letters, kept as it
	// keeps it (handlers do not import the grouping package).
	fp := storetest.GroupID("declined cards")
	c.exec(t, `INSERT INTO error_templates (id, task, error_class, place, tokens, fixed, seq)
		SELECT $1, 'payments.charge', 'CardError', '', w, array_fill(false, ARRAY[cardinality(w)]), nextval('error_templates_seq')
		FROM string_to_array($2, ' ') w`, fp, "card <*> declined at host <*> for customer <*>")
	for i := range 10 {
		host, cc := "payments-3.eu-west-1", card
		if i%5 == 4 {
			host, cc = "payments-1.eu-west-1", otherCard
		}
		storetest.InsertDeadLetter(t, c.db.DB, cardLetter(fp, cc, host, fmt.Sprintf("cus_K7RQ2M9X%02d", i)))
	}

	rec, doc := c.page(t, "/groups/"+fp)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %.300s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), card) || strings.Contains(rec.Body.String(), otherCard) {
		t.Error("the page shows a card number that masking hides")
	}
	if got := squash(byTestID(doc.Selection, "group-template")); got != "card ‹1› declined at host ‹2› for customer ‹3›" {
		t.Errorf("template %q", got)
	}
	if got := squash(byTestID(doc.Selection, "group-id")); got != fp {
		t.Errorf("group id %q, want %s", got, fp)
	}
	if href := byTestID(doc.Selection, "group-edit").AttrOr("href", ""); href != "/groups/"+fp+"/edit" {
		t.Errorf("merge or split link %q", href)
	}
	if got := squash(byTestID(doc.Selection, "group-variables").Find("h2")); got != "What varies · its 10 letters" {
		t.Errorf("variables heading %q", got)
	}

	type row struct{ variable, distinct, values string }
	var rows []row
	byTestID(doc.Selection, "group-variable").Each(func(_ int, s *goquery.Selection) {
		values := squash(byTestID(s, "variable-values"))
		if li := byTestID(s, "variable-value"); li.Length() > 0 {
			values = strings.Join(li.Map(func(_ int, v *goquery.Selection) string { return squash(v) }), " | ")
		}
		rows = append(rows, row{squash(byTestID(s, "variable-label")), squash(byTestID(s, "variable-distinct")), values})
	})
	want := []row{
		{"card ‹1›", "2", "••• (hidden) 10 of 10 · 100%"},
		{"host ‹2›", "2", "payments-3.eu-west-1 8 of 10 · 80% | payments-1.eu-west-1 2 of 10 · 20%"},
		{"customer ‹3›", "10", "every letter its own: cus_K7RQ2M9X0…"},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Errorf("what varies:\n got %q\nwant %q", rows, want)
	}
	// A hidden value cannot be searched for; a host can, among the
	// group's letters.
	vars := byTestID(doc.Selection, "group-variable")
	if n := vars.Eq(0).Find("a").Length(); n != 0 {
		t.Errorf("the hidden value links %d times", n)
	}
	href := vars.Eq(1).Find("a").First().AttrOr("href", "")
	rec, list := c.page(t, href)
	if rec.Code != http.StatusOK || !strings.Contains(href, "fingerprint="+fp) {
		t.Fatalf("%q: status %d", href, rec.Code)
	}
	if n := byTestID(list.Selection, "letter-row").Length(); n != 8 {
		t.Errorf("%q lists %d letters, want the 8 of payments-3", href, n)
	}

	// The inflow by the minute marks the minute the group began.
	if byTestID(doc.Selection, "group-minutely").Length() != 1 || byTestID(doc.Selection, "group-minutely-mark").Length() != 1 {
		t.Error("no per-minute chart with the first seen minute marked")
	}

	// Who may not act sees no way to merge or split.
	h, err := web.NewServer(web.Config{DB: c.store.DB})
	if err != nil {
		t.Fatal(err)
	}
	viewer := httptest.NewRecorder()
	webtest.AsRole(t, h, c.store.Access, dlq.RoleViewer).ServeHTTP(viewer, httptest.NewRequest(http.MethodGet, "/groups/"+fp, nil))
	if viewer.Code != http.StatusOK || strings.Contains(viewer.Body.String(), `data-testid="group-edit"`) {
		t.Errorf("viewer: status %d, merge or split link shown: %v", viewer.Code, strings.Contains(viewer.Body.String(), "group-edit"))
	}
}

// TestGroupPageWithoutATemplate: a group whose letters were grouped
// before templates were learned shows its sample message as before, and
// says so.
func TestGroupPageWithoutATemplate(t *testing.T) {
	t.Parallel()
	c := groupsFixture(t)
	_, doc := c.page(t, "/groups/"+fpNew)
	if byTestID(doc.Selection, "group-template").Length() != 0 || byTestID(doc.Selection, "group-variables").Length() != 0 {
		t.Error("a template or variables for a group without a template")
	}
	if got := squash(doc.Find(".group-id")); !strings.Contains(got, "no template is kept") || squash(byTestID(doc.Selection, "group-id")) != fpNew {
		t.Errorf("group id line %q", got)
	}
	if got := squash(byTestID(doc.Selection, "group-message")); !strings.HasPrefix(got, "card declined for order") {
		t.Errorf("sample message %q", got)
	}
	// Its 12 letters failed 13 minutes ago, in the minute it began.
	var counts []string
	byTestID(doc.Selection, "group-minutely-bar").Each(func(_ int, s *goquery.Selection) {
		if n := s.AttrOr("data-count", ""); n != "0" {
			counts = append(counts, n)
		}
	})
	if fmt.Sprint(counts) != "[12]" || byTestID(doc.Selection, "group-minutely-mark").Length() != 1 {
		t.Errorf("per minute: bars with letters %v, %d marks; want [12] and the first seen mark", counts, byTestID(doc.Selection, "group-minutely-mark").Length())
	}
	_, doc = c.page(t, "/groups/"+fpOld)
	if got := squash(byTestID(doc.Selection, "group-minutely-empty")); got != "No letters of this group in the last 3 hours." {
		t.Errorf("per minute of a group 3 days old: %q", got)
	}
}

// TestGroupPageCountsTheNewestLetters: a big group's values are counted on
// its newest letters, and the page says so, and how many of them did not
// fit the template.
func TestGroupPageCountsTheNewestLetters(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	fp := storetest.GroupID("many charges")
	c.exec(t, `INSERT INTO error_templates (id, task, error_class, place, tokens, fixed, seq)
		VALUES ($1, 'billing.charge', 'ChargeError', '', ARRAY['charge', '<*>', 'failed'], ARRAY[false, false, false], 1)`, fp)
	c.exec(t, `INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
		attempts, max_attempts, reason, fingerprint, enqueued_at, failed_at)
		SELECT g, 'default', 'billing.charge', '[]', '{}', 'ChargeError',
			CASE WHEN g > 2002 THEN 'payments are down' ELSE 'charge ch_' || g || ' failed' END,
			3, 3, 'exhausted', $1, now() - interval '1 hour' + g * interval '1 second', now() - interval '1 hour' + g * interval '1 second'
		FROM generate_series(1, 2005) g`, fp)
	_, doc := c.page(t, "/groups/"+fp)
	if got := squash(byTestID(doc.Selection, "group-variables").Find("h2")); got != "What varies · the newest 2,000 of 2,005 letters" {
		t.Errorf("heading %q", got)
	}
	if got := squash(byTestID(doc.Selection, "variables-unfit")); !strings.HasPrefix(got, "3 of these letters do not fit the template") {
		t.Errorf("unfit note %q", got)
	}
	if got := squash(byTestID(doc.Selection, "variable-distinct")); got != "1,997" {
		t.Errorf("distinct %q, want 1,997", got)
	}
}

// TestGroupPageNamesVariablesByTheirPlace: each variable reads as it sits
// in the template: after the word before it, with the variables between,
// or before the word after it when it starts the template; a currency and
// the number in a word are variables too.
func TestGroupPageNamesVariablesByTheirPlace(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	fp := storetest.GroupID("charges in currencies")
	c.exec(t, `INSERT INTO error_templates (id, task, error_class, place, tokens, fixed, seq)
		VALUES ($1, 'billing.charge', 'ChargeError', '', ARRAY['<*>', 'charge', '<CODE>', '<*>', 'failed', 'onExtend:<*>'],
			ARRAY[false, false, false, false, false, false], 1)`, fp)
	for i, cur := range []string{"EUR", "EUR", "USD"} {
		storetest.InsertDeadLetter(t, c.db.DB, storetest.Letter{Task: "billing.charge", ErrorClass: "ChargeError", Fingerprint: fp,
			Message: fmt.Sprintf("ord_ABCDEFGH%d charge %s 12.5%d failed: onExtend:1514", i, cur, i)})
	}
	_, doc := c.page(t, "/groups/"+fp)
	if got := squash(byTestID(doc.Selection, "group-template")); got != "‹1› charge ‹2› ‹3› failed onExtend:‹4›" {
		t.Errorf("template %q", got)
	}
	var got []string
	byTestID(doc.Selection, "group-variable").Each(func(_ int, s *goquery.Selection) {
		got = append(got, squash(byTestID(s, "variable-label"))+" = "+squash(byTestID(s, "variable-value").First()))
	})
	want := []string{"‹1› charge = ", "charge ‹2› = EUR 2 of 3 · 67%", "charge ‹2› ‹3› = ", "onExtend:‹4› = 1514 3 of 3 · 100%"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("variables\n got %q\nwant %q", got, want)
	}
}
