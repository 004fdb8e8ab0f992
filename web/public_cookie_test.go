package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// TestPublicDocumentsSetNoCookie: what a shared cache may keep and hand
// to many clients (the OpenAPI document, the favicon, the health checks)
// carries no cookie, with or without a stale session cookie in the
// request.
func TestPublicDocumentsSetNoCookie(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	h, err := web.NewServer(web.Config{DB: db.DB})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{web.OpenAPIPath, "/healthz", "/favicon.ico", "/static/favicon.svg"} {
		for _, cookie := range []string{"", "redrive_session=stale"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if cookie != "" {
				req.Header.Set("Cookie", cookie)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 400 {
				t.Fatalf("GET %s: %d", path, rec.Code)
			}
			if c := rec.Header().Values("Set-Cookie"); len(c) > 0 {
				t.Errorf("GET %s (cookie %q) sets %q; a public document sets no cookie", path, cookie, c)
			}
		}
	}
}
