package handlers_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/store/storetest"
)

func (s letterServer) getJSON(t *testing.T, path string, into any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: content type %q", path, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, rec.Body.String())
	}
	return rec.Code
}

type apiErrorBody struct {
	Error struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
}

func TestAPIDeadLetters(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	at := time.Now().UTC().Truncate(time.Second)
	for i := range 7 {
		s.insert(t, storetest.Letter{Task: "t.a", FailedAt: at.Add(-time.Duration(i) * time.Minute), Args: fmt.Sprintf(`[%d]`, i)})
	}
	replayed := s.insert(t, storetest.Letter{Task: "t.b", Status: "replayed", ReplayJobID: 55, Traceback: "tb here",
		History: `[{"attempt":1,"at":"2026-03-01T00:00:00Z","class":"E","message":"m","outcome":"dead"}]`})

	t.Run("PagesWithCursor", func(t *testing.T) {
		var all []map[string]any
		path := "/api/v1/dead-letters?task=t.a&limit=3"
		for pages := 0; ; pages++ {
			var page struct {
				Items      []map[string]any `json:"items"`
				NextCursor *string          `json:"next_cursor"`
			}
			if code := s.getJSON(t, path, &page); code != http.StatusOK {
				t.Fatalf("%s: %d", path, code)
			}
			all = append(all, page.Items...)
			if page.NextCursor == nil {
				break
			}
			path = "/api/v1/dead-letters?task=t.a&limit=3&cursor=" + *page.NextCursor
		}
		if len(all) != 7 {
			t.Fatalf("got %d items, want 7", len(all))
		}
		for _, k := range []string{"id", "job_id", "task", "queue", "args", "kwargs", "error_class", "error", "attempts",
			"max_attempts", "reason", "fingerprint", "failed_at", "replayed_at", "replay_job_id", "discarded_at", "status"} {
			if _, ok := all[0][k]; !ok {
				t.Errorf("item lacks %q", k)
			}
		}
		if fmt.Sprint(all[0]["args"]) != "[0]" {
			t.Errorf("args should be JSON, got %v", all[0]["args"])
		}
	})

	t.Run("Detail", func(t *testing.T) {
		var d map[string]any
		if code := s.getJSON(t, fmt.Sprintf("/api/v1/dead-letters/%d", replayed), &d); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		if d["traceback"] != "tb here" || d["status"] != "replayed" || d["replay_job_id"] != float64(55) {
			t.Fatalf("detail %v", d)
		}
		if h, ok := d["history"].([]any); !ok || len(h) != 1 {
			t.Fatalf("history %v", d["history"])
		}
	})

	t.Run("ErrorsAreJSON", func(t *testing.T) {
		for path, want := range map[string]struct {
			status int
			field  string
		}{
			"/api/v1/dead-letters?limit=100000":    {400, "limit"},
			"/api/v1/dead-letters?cursor=bogus":    {400, "cursor"},
			"/api/v1/dead-letters?reason=whatever": {400, "reason"},
			"/api/v1/dead-letters?since=soon":      {400, "since"},
			"/api/v1/dead-letters/123456789":       {404, ""},
			"/api/v1/dead-letters/x1":              {400, ""},
			"/api/v1/groups?sort=random":           {400, "sort"},
		} {
			var body apiErrorBody
			code := s.getJSON(t, path, &body)
			if code != want.status || body.Error.Code == "" || body.Error.Message == "" {
				t.Errorf("%s: %d %+v", path, code, body)
			}
			if want.field != "" && body.Error.Fields[want.field] == "" {
				t.Errorf("%s: fields %v should name %s", path, body.Error.Fields, want.field)
			}
		}
	})

	t.Run("Groups", func(t *testing.T) {
		var out struct {
			Items []struct {
				Fingerprint string  `json:"fingerprint"`
				Total       int     `json:"total"`
				Inflow      []int64 `json:"inflow"`
			} `json:"items"`
		}
		if code := s.getJSON(t, "/api/v1/groups?sort=total", &out); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		if len(out.Items) != 2 || out.Items[0].Total != 7 || len(out.Items[0].Inflow) != 14 {
			t.Fatalf("groups %+v", out.Items)
		}
	})
}

func TestExportDeadLetters(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	for i := range 1234 {
		s.insert(t, storetest.Letter{Task: "t.export", Message: fmt.Sprintf("=HYPERLINK(\"evil\") %d", i)})
	}
	s.insert(t, storetest.Letter{Task: "t.other"})

	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dead-letters/export.csv?task=t.export&limit=5&cursor=", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	if cd := rec.Header().Get("Content-Disposition"); !strings.HasPrefix(cd, `attachment; filename="dead-letters-`) || !strings.HasSuffix(cd, `.csv"`) {
		t.Fatalf("content disposition %q", cd)
	}
	records, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1235 || records[0][0] != "id" {
		t.Fatalf("want header + 1234 rows (the page limit does not apply), got %d", len(records))
	}
	if msg := records[1][7]; !strings.HasPrefix(msg, "'=HYPERLINK") {
		t.Fatalf("formula not defused: %q", msg)
	}

	rec = httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dead-letters/export.json?task=t.export", nil))
	var items []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &items); err != nil {
		t.Fatalf("json export does not parse: %v", err)
	}
	if len(items) != 1234 || items[0]["task"] != "t.export" {
		t.Fatalf("json export: %d items", len(items))
	}
	if cd := rec.Header().Get("Content-Disposition"); !strings.HasSuffix(cd, `.json"`) {
		t.Fatalf("content disposition %q", cd)
	}

	rec = httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dead-letters/export.json?task=nothing", nil))
	if strings.TrimSpace(rec.Body.String()) != "[\n]" && strings.TrimSpace(rec.Body.String()) != "[]" {
		var v []any
		if json.Unmarshal(rec.Body.Bytes(), &v) != nil || len(v) != 0 {
			t.Fatalf("empty export should be an empty array: %q", rec.Body.String())
		}
	}

	rec = httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dead-letters/export.csv?status=bogus", nil))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("bad filter export: %d", rec.Code)
	}
}
