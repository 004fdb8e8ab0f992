package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The open list polls for letters newer than its newest and offers them:
// "N new letters since you opened this page — show them", for its own
// filter only.
func TestListSaysWhenNewLettersArrive(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.insertLetters(t, 3, "billing.charge", "fp-charge", "1 hour")
	_, doc := c.page(t, "/dead-letters?task=billing.charge")
	poll := byTestID(doc.Selection, "newer").AttrOr("hx-get", "")
	if !strings.HasPrefix(poll, "/dead-letters/newer?") || !strings.Contains(poll, "task=billing.charge") {
		t.Fatalf("poll %q", poll)
	}
	_, got := c.page(t, poll)
	if n := byTestID(got.Selection, "newer-note").Length(); n != 0 {
		t.Fatalf("nothing new yet, but %q", squash(got.Selection))
	}
	c.insertLetters(t, 2, "billing.charge", "fp-charge", "0 minutes")
	c.insertLetters(t, 4, "mail.send", "fp-mail", "0 minutes") // another filter's
	_, got = c.page(t, poll)
	if s := squash(byTestID(got.Selection, "newer-note")); s != "2 new letters since you opened this page — show them" {
		t.Fatalf("note %q", s)
	}
	if href := byTestID(got.Selection, "newer-show").AttrOr("href", ""); href != "/dead-letters?task=billing.charge" {
		t.Fatalf("show them links to %q", href)
	}
	if rec, _ := c.page(t, "/dead-letters/newer?after=x"); rec.Code != http.StatusBadRequest {
		t.Fatalf("bad after: %d", rec.Code)
	}
}

// A letter opened from a filtered list leads back to that list.
func TestLetterBreadcrumbKeepsTheFilter(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.insertLetters(t, 2, "billing.charge", "fp-charge", "1 hour")
	_, list := c.page(t, "/dead-letters?task=billing.charge")
	href := byTestID(list.Selection, "letter-link").First().AttrOr("href", "")
	_, doc := c.page(t, href)
	if got := byTestID(doc.Selection, "crumb-list").AttrOr("href", ""); got != "/dead-letters?task=billing.charge" {
		t.Fatalf("breadcrumb of %q leads to %q", href, got)
	}
	_, doc = c.page(t, strings.Split(href, "?")[0]+"?list="+url.QueryEscape("%zz"))
	if got := byTestID(doc.Selection, "crumb-list").AttrOr("href", ""); got != "/dead-letters" {
		t.Fatalf("a damaged filter: breadcrumb %q", got)
	}
}
