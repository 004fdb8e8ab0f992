package handlers_test

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
)

var letterFilterNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func TestParseFilter(t *testing.T) {
	t.Parallel()
	cursor := dlq.Cursor{FailedAt: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), ID: 42}

	t.Run("DefaultsToPendingNewestFifty", func(t *testing.T) {
		t.Parallel()
		f, err := handlers.ParseFilter(url.Values{}, letterFilterNow)
		if err != nil {
			t.Fatal(err)
		}
		want := dlq.Filter{Status: dlq.StatusPending, Limit: dlq.DefaultLimit}
		if !reflect.DeepEqual(f, want) {
			t.Fatalf("got %+v, want %+v", f, want)
		}
		if f.Narrowed() {
			t.Fatal("the default filter is not narrowed")
		}
	})

	ok := []struct {
		name  string
		query string
		check func(t *testing.T, f dlq.Filter)
	}{
		{"StatusAllMeansEveryStatus", "status=all", func(t *testing.T, f dlq.Filter) {
			if f.Status != "" {
				t.Fatalf("status %q", f.Status)
			}
		}},
		{"EveryField", "task=billing.charge&queue=payments&reason=permanent&status=replayed&error_class=Stripe.CardError&fingerprint=0123456789abcdef&q=order+42&limit=500", func(t *testing.T, f dlq.Filter) {
			want := dlq.Filter{Task: "billing.charge", Queue: "payments", Reason: dlq.ReasonPermanent, Status: dlq.StatusReplayed,
				ErrorClass: "Stripe.CardError", Fingerprint: "0123456789abcdef", Q: "order 42", Limit: 500}
			if !reflect.DeepEqual(f, want) {
				t.Fatalf("got %+v", f)
			}
		}},
		{"RelativeSince", "since=24h", func(t *testing.T, f dlq.Filter) {
			if !f.Since.At.Equal(letterFilterNow.Add(-24*time.Hour)) || f.Since.Raw != "24h" {
				t.Fatalf("since %+v", f.Since)
			}
		}},
		{"RelativeDaysAndMinutes", "since=7d&until=90m", func(t *testing.T, f dlq.Filter) {
			if !f.Since.At.Equal(letterFilterNow.Add(-7*24*time.Hour)) || !f.Until.At.Equal(letterFilterNow.Add(-90*time.Minute)) {
				t.Fatalf("since %+v until %+v", f.Since, f.Until)
			}
		}},
		{"DatetimeLocalIsUTC", "since=2026-03-01T08:30", func(t *testing.T, f dlq.Filter) {
			if !f.Since.At.Equal(time.Date(2026, 3, 1, 8, 30, 0, 0, time.UTC)) {
				t.Fatalf("since %v", f.Since.At)
			}
		}},
		{"RFC3339WithZone", "until=2026-03-01T08:30:00%2B02:00", func(t *testing.T, f dlq.Filter) {
			if !f.Until.At.Equal(time.Date(2026, 3, 1, 6, 30, 0, 0, time.UTC)) {
				t.Fatalf("until %v", f.Until.At)
			}
		}},
		{"Cursor", "cursor=" + cursor.String(), func(t *testing.T, f dlq.Filter) {
			if f.After == nil || *f.After != cursor {
				t.Fatalf("cursor %+v", f.After)
			}
		}},
		{"SeveralGroupsSortedOnceEach", "fingerprint=+ffff000011112222+,0123456789ABCDEF,,ffff000011112222,", func(t *testing.T, f dlq.Filter) {
			want := []string{"0123456789abcdef", "ffff000011112222"}
			if f.Fingerprint != "" || !reflect.DeepEqual(f.Fingerprints, want) || !reflect.DeepEqual(f.Groups(), want) {
				t.Fatalf("fingerprint %q, fingerprints %q; want the two groups in Fingerprints", f.Fingerprint, f.Fingerprints)
			}
			if got := f.Values().Get("fingerprint"); got != "0123456789abcdef,ffff000011112222" {
				t.Fatalf("encoded as %q", got)
			}
		}},
		{"OneGroupOfAListIsTheSingleForm", "fingerprint=0123456789abcdef,", func(t *testing.T, f dlq.Filter) {
			if f.Fingerprint != "0123456789abcdef" || f.Fingerprints != nil {
				t.Fatalf("fingerprint %q, fingerprints %q", f.Fingerprint, f.Fingerprints)
			}
		}},
		{"SpacesTrimmed", "task=+billing.charge+&q=++timeout++", func(t *testing.T, f dlq.Filter) {
			if f.Task != "billing.charge" || f.Q != "timeout" {
				t.Fatalf("%+v", f)
			}
		}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, _ := url.ParseQuery(tc.query)
			f, err := handlers.ParseFilter(v, letterFilterNow)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}

	bad := []struct {
		name, query, field string
	}{
		{"UnknownReason", "reason=bored", "reason"},
		{"UnknownStatus", "status=dead", "status"},
		{"BadTime", "since=yesterday", "since"},
		{"BadUntil", "until=2026-13-01", "until"},
		{"SinceAfterUntil", "since=1h&until=2h", "until"},
		{"LimitZero", "limit=0", "limit"},
		{"LimitHuge", "limit=100000", "limit"},
		{"LimitNotNumber", "limit=ten", "limit"},
		{"TamperedCursor", "cursor=" + cursor.String()[:len(cursor.String())-2], "cursor"},
		{"GarbageCursor", "cursor=%27%3BDROP+TABLE", "cursor"},
		{"TaskWithSpaces", "task=a+b", "task"},
		{"SearchTooShort", "q=ab", "q"},
		{"SearchTooLong", "q=" + strings.Repeat("x", 201), "q"},
		{"SearchNotUTF8", "q=%ff%fe%fd", "q"},
		{"ErrorClassControl", "error_class=a%00b", "error_class"},
		{"RelativeTooFar", "since=999999w", "since"},
		{"TimeTooOld", "since=0001-01-01", "since"},
		{"GroupNotAnID", "fingerprint=fp-card", "fingerprint"},
		{"OneGroupOfSeveralNotAnID", "fingerprint=0123456789abcdef,0123456789abcdeg", "fingerprint"},
		{"GroupRepeated", "fingerprint=0123456789abcdef&fingerprint=ffff000011112222", "fingerprint"},
		{"TooManyGroups", "fingerprint=" + manyGroups(dlq.MaxFilterGroups+1), "fingerprint"},
	}
	for _, tc := range bad {
		t.Run("Refuses"+tc.name, func(t *testing.T) {
			t.Parallel()
			v, _ := url.ParseQuery(tc.query)
			_, err := handlers.ParseFilter(v, letterFilterNow)
			var verr *dlq.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("want a ValidationError, got %v", err)
			}
			if _, ok := verr.Fields[tc.field]; !ok || len(verr.Fields) != 1 {
				t.Fatalf("want exactly field %q named, got %v", tc.field, verr.Fields)
			}
			if !errors.Is(err, dlq.ErrInvalid) {
				t.Fatal("a ValidationError must match ErrInvalid")
			}
		})
	}

	t.Run("SearchEscapesNothingAtParse", func(t *testing.T) {
		t.Parallel()
		f, err := handlers.ParseFilter(url.Values{"q": {"100%_done"}}, letterFilterNow)
		if err != nil || f.Q != "100%_done" {
			t.Fatalf("%+v %v", f, err)
		}
	})
}

// manyGroups is n distinct group ids, separated by commas.
func manyGroups(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%016x", i)
	}
	return strings.Join(ids, ",")
}

// FuzzParseFilter: no input panics, and an accepted filter encodes to a
// query string that parses back to the same filter (what makes a pasted
// URL show the same view).
func FuzzParseFilter(f *testing.F) {
	seeds := []string{
		"", "status=all", "task=billing.charge&status=replayed", "since=24h&until=1h", "since=2026-03-01T08:30",
		"until=2026-03-01T08:30:00Z", "q=timeout&limit=10", "reason=lease_expired&fingerprint=0123456789abcdef",
		"fingerprint=0123456789abcdef,ffff000011112222", "fingerprint=a,,b",
		"cursor=AQAGRtSGl2AAAAAAAAAAACo", "limit=-1", "q=%25%5F", "since=7d&until=2026-01-01", "status=any",
		"error_class=psycopg2.OperationalError", "q=" + strings.Repeat("é", 100),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		got, err := handlers.ParseFilter(v, letterFilterNow)
		if err != nil {
			var verr *dlq.ValidationError
			if !errors.As(err, &verr) || len(verr.Fields) == 0 {
				t.Fatalf("error is not a ValidationError naming a field: %v", err)
			}
			return
		}
		again, err := handlers.ParseFilter(got.Values(), letterFilterNow)
		if err != nil {
			t.Fatalf("encoding %q of an accepted filter is refused: %v", got.Values().Encode(), err)
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("round trip changed the filter:\n%+v\n%+v", got, again)
		}
	})
}

func TestParseGroupFilter(t *testing.T) {
	t.Parallel()
	f, err := handlers.ParseGroupFilter(url.Values{})
	if err != nil || f.Sort != dlq.GroupSortPending || f.Limit != dlq.DefaultGroupLimit {
		t.Fatalf("defaults: %+v %v", f, err)
	}
	for _, q := range []string{"sort=name", "sort=pending%3BDROP", "limit=0", "limit=9999", "task=a b"} {
		v, _ := url.ParseQuery(q)
		if _, err := handlers.ParseGroupFilter(v); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", q, err)
		}
	}
}

func TestParseAuditFilter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		query   string
		want    dlq.AuditFilter
		problem string // the field named in the error, "" when valid
	}{
		{name: "Empty", query: "", want: dlq.AuditFilter{Limit: dlq.DefaultAuditLimit}},
		{name: "Everything", query: "actor=olga&action=discard&dead_letter_id=42&since=24h&until=2026-03-01T11:00&limit=10&cursor=99",
			want: dlq.AuditFilter{Actor: "olga", Action: "discard", DeadLetterID: 42,
				Since: dlq.TimeBound{Raw: "24h", At: now.Add(-24 * time.Hour)},
				Until: dlq.TimeBound{Raw: "2026-03-01T11:00", At: now.Add(-time.Hour)}, Limit: 10, Before: 99}},
		{name: "UnknownAction", query: "action=drop", problem: "action"},
		{name: "LetterNotANumber", query: "dead_letter_id=abc", problem: "dead_letter_id"},
		{name: "LetterZero", query: "dead_letter_id=0", problem: "dead_letter_id"},
		{name: "CursorNegative", query: "cursor=-5", problem: "cursor"},
		{name: "LimitTooLarge", query: "limit=501", problem: "limit"},
		{name: "ActorControlCharacter", query: "actor=a%00b", problem: "actor"},
		{name: "RangeBackwards", query: "since=1h&until=2h", problem: "until"},
		{name: "BadTime", query: "since=yesterday", problem: "since"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v, _ := url.ParseQuery(c.query)
			got, err := handlers.ParseAuditFilter(v, now)
			if c.problem != "" {
				var ve *dlq.ValidationError
				if !errors.As(err, &ve) || ve.Fields[c.problem] == "" {
					t.Fatalf("want a problem with %s, got %v", c.problem, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
			// Values reads back to the same filter.
			again, err := handlers.ParseAuditFilter(got.Values(), now)
			if err != nil || again != got {
				t.Fatalf("round trip: %+v %v", again, err)
			}
		})
	}
}

func FuzzParseAuditFilter(f *testing.F) {
	for _, s := range []string{"", "actor=olga", "action=replay&cursor=10", "dead_letter_id=9&since=7d&until=1h",
		"limit=0", "cursor=9223372036854775808", "since=2026-01-02T15:04:05Z"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		got, err := handlers.ParseAuditFilter(v, now)
		if err != nil {
			var ve *dlq.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("an error that is not a ValidationError naming a field: %v", err)
			}
			return
		}
		if got.Limit < 1 || got.Limit > dlq.MaxAuditLimit || got.DeadLetterID < 0 || got.Before < 0 {
			t.Fatalf("out of range: %+v", got)
		}
		again, err := handlers.ParseAuditFilter(got.Values(), now)
		if err != nil || again != got {
			t.Fatalf("round trip of %q: %+v, %v; want %+v", q, again, err, got)
		}
	})
}
