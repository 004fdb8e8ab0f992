package handlers

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

func TestParseJobFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		query     string
		want      dlq.JobFilter
		badFields []string
	}{
		{name: "EmptyIsEverythingFirstPage", query: "", want: dlq.JobFilter{Limit: dlq.DefaultJobPageSize}},
		{name: "AllFilters", query: "state=retrying&queue=payments&task=billing.charge&before=120&limit=20",
			want: dlq.JobFilter{State: dlq.StateRetrying, Queue: "payments", Task: "billing.charge", Before: 120, Limit: 20}},
		{name: "AfterCursor", query: "after=7", want: dlq.JobFilter{After: 7, Limit: dlq.DefaultJobPageSize}},
		{name: "EmptyValuesDoNotFilter", query: "state=&queue=&task=", want: dlq.JobFilter{Limit: dlq.DefaultJobPageSize}},
		{name: "UnknownParametersIgnored", query: "utm=x", want: dlq.JobFilter{Limit: dlq.DefaultJobPageSize}},
		{name: "UnknownState", query: "state=zombie", badFields: []string{"state"}},
		{name: "StateIsCaseSensitive", query: "state=DEAD", badFields: []string{"state"}},
		{name: "QueueWithSpace", query: "queue=a+b", badFields: []string{"queue"}},
		{name: "TaskTooLong", query: "task=" + strings.Repeat("t", 201), badFields: []string{"task"}},
		{name: "CursorNotNumber", query: "before=abc", badFields: []string{"before"}},
		{name: "CursorZero", query: "after=0", badFields: []string{"after"}},
		{name: "CursorNegative", query: "before=-5", badFields: []string{"before"}},
		{name: "BothCursors", query: "before=5&after=2", badFields: []string{"after"}},
		{name: "LimitTooBig", query: "limit=501", badFields: []string{"limit"}},
		{name: "LimitZero", query: "limit=0", badFields: []string{"limit"}},
		{name: "EveryProblemNamed", query: "state=x&queue=%20&limit=y", badFields: []string{"state", "queue", "limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseJobFilter(q)
			if len(tt.badFields) > 0 {
				var ve *dlq.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("want a ValidationError, got %v", err)
				}
				if !errors.Is(err, dlq.ErrInvalid) {
					t.Error("ValidationError does not match ErrInvalid")
				}
				if len(ve.Fields) != len(tt.badFields) {
					t.Errorf("fields %v, want exactly %v", ve.Fields, tt.badFields)
				}
				for _, f := range tt.badFields {
					if ve.Fields[f] == "" {
						t.Errorf("no message for %q in %v", f, ve.Fields)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Any query string either parses into a filter that survives a trip through
// Values, or is refused with a ValidationError; nothing panics.
func FuzzParseJobFilter(f *testing.F) {
	for _, seed := range []string{
		"", "state=dead", "state=retrying&queue=payments&task=a.b&before=10", "after=99&limit=500",
		"limit=-1", "before=1&after=1", "state=%00", "queue=" + strings.Repeat("q", 201), "task=a%20b",
		"before=9223372036854775807", "before=9223372036854775808", "state=dead&state=running", "limit=050",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		got, err := ParseJobFilter(q)
		if err != nil {
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("%q: error is not a ValidationError with fields: %v", raw, err)
			}
			return
		}
		again, err := ParseJobFilter(got.Values())
		if err != nil {
			t.Fatalf("%q: Values() %q does not parse: %v", raw, got.Values().Encode(), err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("%q: round trip changed the filter: %+v → %+v", raw, got, again)
		}
		if got.Limit < 1 || got.Limit > dlq.MaxJobPageSize || (got.Before != 0 && got.After != 0) {
			t.Fatalf("%q: parsed filter out of bounds: %+v", raw, got)
		}
	})
}
