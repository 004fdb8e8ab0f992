package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// TestFavicon: the icon the layout links is served to anyone, and the
// /favicon.ico browsers ask for by themselves leads to it instead of a 404.
func TestFavicon(t *testing.T) {
	t.Parallel()
	h, err := web.NewServer(web.Config{DB: storetest.NewDB(t).DB})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := get("/favicon.ico"); rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/static/favicon.svg" {
		t.Errorf("GET /favicon.ico: %d Location=%q, want 301 to /static/favicon.svg", rec.Code, rec.Header().Get("Location"))
	}
	rec := get("/static/favicon.svg")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "image/svg+xml") ||
		!strings.Contains(rec.Body.String(), "<svg") {
		t.Errorf("GET /static/favicon.svg: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !strings.Contains(get("/login").Body.String(), `rel="icon" href="/static/favicon.svg"`) {
		t.Error("the layout does not link the icon")
	}
}
