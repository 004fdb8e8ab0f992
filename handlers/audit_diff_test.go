package handlers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

func TestJSONDiff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, before, after string
		want                []string // "op text", nil when equal
	}{
		{"Equal", `{"a":1}`, `{ "a": 1 }`, nil},
		{"OneValue", `[1,{"order":"A-1"}]`, `[1,{"order":"A-2"}]`,
			[]string{"  [", "    1,", "    {", `-     "order": "A-1"`, `+     "order": "A-2"`, "    }", "  ]"}},
		{"AddedKey", `{"a":1}`, `{"a":1,"b":2}`, []string{"  {", `-   "a": 1`, `+   "a": 1,`, `+   "b": 2`, "  }"}},
		{"NotJSON", `oops`, `[]`, []string{"- oops", "+ []"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := jsonDiff("args", json.RawMessage(c.before), json.RawMessage(c.after))
			if c.want == nil {
				if d != nil {
					t.Fatalf("want no diff, got %+v", d)
				}
				return
			}
			var got []string
			for _, l := range d.Lines {
				got = append(got, l.Op+" "+l.Text)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// FuzzLineDiff: whatever the input, the kept and removed lines spell the
// old text and the kept and added lines the new one.
func FuzzLineDiff(f *testing.F) {
	f.Add("a\nb\nc", "a\nc\nd")
	f.Add("", "x")
	f.Add("{\n  \"k\": 1\n}", "{\n  \"k\": 2\n}")
	f.Fuzz(func(t *testing.T, a, b string) {
		as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
		var old, new []string
		for _, l := range lineDiff(as, bs) {
			switch l.Op {
			case " ":
				old, new = append(old, l.Text), append(new, l.Text)
			case "-":
				old = append(old, l.Text)
			case "+":
				new = append(new, l.Text)
			default:
				t.Fatalf("op %q", l.Op)
			}
		}
		if !slices.Equal(old, as) || !slices.Equal(new, bs) {
			t.Fatalf("diff does not rebuild its inputs")
		}
	})
}

func TestAuditRow(t *testing.T) {
	t.Parallel()
	letter, op, maxID := int64(7), int64(3), int64(90)
	filter := json.RawMessage(`{"task":["billing.charge"],"since":["2026-01-02T03:04:05Z"]}`)
	r := auditRow(dlq.AuditEntry{ID: 12, Action: dlq.ActionBulkStart, OperationID: &op, Filter: &filter, MaxID: &maxID,
		Counts: json.RawMessage(`{"skipped":1,"matched":5,"zeta":2}`), Details: json.RawMessage(`{}`)})
	want := views.AuditRow{ID: 12, Href: "/audit/12", Action: dlq.ActionBulkStart, ActionText: "Started a bulk operation",
		OperationID: 3, OperationHref: "/operations/3", MaxID: 90,
		Filter:     "task billing.charge, failed since 2026-01-02 03:04:05 UTC, pending",
		FilterHref: "/dead-letters?since=2026-01-02T03%3A04%3A05Z&task=billing.charge",
		Counts: []views.CountItem{{Label: "matched", N: "5"}, {Label: "skipped (already replayed or discarded)", N: "1"},
			{Label: "zeta", N: "2"}}}
	if !equalRows(r, want) {
		t.Fatalf("got  %+v\nwant %+v", r, want)
	}
	r = auditRow(dlq.AuditEntry{ID: 13, Action: dlq.ActionReplay, DeadLetterID: &letter,
		Counts: json.RawMessage(`{"replayed":1}`), Details: json.RawMessage(`{"replay_job_id": 44}`)})
	if r.LetterHref != "/dead-letters/7" || r.JobID != 44 || r.JobHref != "/jobs/44" || r.ActionText != "Replayed" {
		t.Fatalf("single replay row %+v", r)
	}
	// A pause's rows say what was paused, and until when.
	for _, tc := range []struct{ action, details, want string }{
		{dlq.ActionPause, `{"pause_id":4,"kind":"task","name":"payments.charge","task":"payments.charge","until":"2026-12-07T15:04:00Z"}`,
			"Paused task payments.charge until 2026-12-07 15:04 UTC"},
		{dlq.ActionPause, `{"pause_id":5,"kind":"queue","name":"emails","queue":"emails"}`, "Paused queue emails until someone resumes it"},
		{dlq.ActionResume, `{"pause_id":4,"kind":"task","name":"payments.charge"}`, "Resumed task payments.charge"},
		{dlq.ActionPauseExpired, `{"pause_id":4,"kind":"task","name":"payments.charge"}`, "The pause of task payments.charge expired"},
	} {
		if r := auditRow(dlq.AuditEntry{ID: 14, Action: tc.action, Details: json.RawMessage(tc.details)}); r.ActionText != tc.want {
			t.Errorf("%s row says %q; want %q", tc.action, r.ActionText, tc.want)
		}
	}
	// The action filter offers every action a pause records.
	offered := map[string]bool{}
	for _, o := range actionOptions() {
		offered[o.Value] = true
	}
	for _, a := range []string{dlq.ActionPause, dlq.ActionResume, dlq.ActionPauseExpired, dlq.ActionGroupMerge} {
		if !offered[a] {
			t.Errorf("the action filter lacks %s", a)
		}
	}
}

func equalRows(a, b views.AuditRow) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
