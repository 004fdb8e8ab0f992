package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
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
	c.exec(t, `UPDATE dead_letter_records SET traceback = 'Traceback: charge failed for order ' || id WHERE fingerprint = $1`, fpNew)
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
