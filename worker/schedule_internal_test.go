package worker

import (
	"strings"
	"testing"
	"time"
)

// utc parses an RFC 3339 time.
func utc(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at.UTC()
}

// occurrences lists the first n occurrences of s after from, in UTC.
func occurrences(t *testing.T, s Schedule, from time.Time, n int) []string {
	t.Helper()
	tm, _, err := parseTiming(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	at := from
	for range n {
		at = tm.next(at)
		out = append(out, at.UTC().Format(time.RFC3339))
	}
	return out
}

func TestScheduleOccurrences(t *testing.T) {
	t.Parallel()
	// In 2026 Europe/Berlin goes from 02:00 CET to 03:00 CEST on 29 March
	// (the hour 02:xx does not exist) and from 03:00 CEST back to 02:00 CET
	// on 25 October (02:xx happens twice); New York does the same on 8
	// March (02:00 EST to 03:00 EDT) and 1 November (02:00 EDT to 01:00 EST).
	tests := []struct {
		name string
		s    Schedule
		from string
		want []string
	}{
		{"DailyAtASkippedTimeRunsOnceThatDayAsLateAsTheSkip",
			Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin"}, "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"}}, // 02:30 CET, 03:30 CEST, 02:30 CEST
		{"DailyAtARepeatedTimeRunsOnceInTheFirstPass",
			Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin"}, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}}, // 02:30 CEST, then the next day's 02:30 CET
		{"DailyFromWithinTheSecondPassWaitsForTomorrow",
			Schedule{Cron: "30 2 * * *", Timezone: "Europe/Berlin"}, "2026-10-25T01:10:00Z", // 02:10 CET, the second pass
			[]string{"2026-10-26T01:30:00Z"}},
		{"EveryThirtyMinutesCountsRealTimeAcrossTheRepeatedHour",
			Schedule{Cron: "*/30 * * * *", Timezone: "Europe/Berlin"}, "2026-10-24T23:45:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"}},
		{"EveryFifteenMinutesCarriesOnAcrossTheSkippedHour",
			Schedule{Cron: "*/15 * * * *", Timezone: "Europe/Berlin"}, "2026-03-29T00:40:00Z", // 01:40 CET
			[]string{"2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z"}}, // 01:45 CET, 03:00 CEST, 03:15 CEST
		{"NewYorkWeekdaysAtNineKeepNineThroughTheChange",
			Schedule{Cron: "0 9 * * 1-5", Timezone: "America/New_York"}, "2026-03-05T00:00:00Z",
			[]string{"2026-03-05T14:00:00Z", "2026-03-06T14:00:00Z", "2026-03-09T13:00:00Z"}}, // Thu, Fri EST; Mon EDT
		{"NewYorkRepeatedOneThirtyRunsOnce",
			Schedule{Cron: "30 1 * * *", Timezone: "America/New_York"}, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}}, // 01:30 EDT, then 01:30 EST the next day
		{"DescriptorInATimezone",
			Schedule{Cron: "@daily", Timezone: "Asia/Tokyo"}, "2026-05-01T00:00:00Z",
			[]string{"2026-05-01T15:00:00Z", "2026-05-02T15:00:00Z"}},
		{"SecondsField",
			Schedule{Cron: "*/20 * * * * *"}, "2026-05-01T00:00:05Z",
			[]string{"2026-05-01T00:00:20Z", "2026-05-01T00:00:40Z", "2026-05-01T00:01:00Z"}},
		{"IntervalAlignsToTheEpoch",
			Schedule{Every: 15 * time.Minute}, "2026-05-01T10:07:13Z",
			[]string{"2026-05-01T10:15:00Z", "2026-05-01T10:30:00Z"}},
		{"IntervalFromAnOccurrenceIsTheNextOne",
			Schedule{Every: 2 * time.Second}, "2026-05-01T10:00:00Z",
			[]string{"2026-05-01T10:00:02Z", "2026-05-01T10:00:04Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := occurrences(t, tt.s, utc(t, tt.from), len(tt.want))
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("occurrences after %s:\n got %v\nwant %v", tt.from, got, tt.want)
			}
		})
	}
}

func TestFollowingRunMakesUpOneMissedOccurrenceNotAll(t *testing.T) {
	t.Parallel()
	tm := interval{every: time.Minute}
	at := utc(t, "2026-05-01T10:00:00Z")
	if got := followingRun(tm, at, at.Add(time.Second)); !got.Equal(utc(t, "2026-05-01T10:01:00Z")) {
		t.Errorf("on time: following %s, want the next minute", got)
	}
	// The fleet was away for an hour: the occurrence it finds passed is
	// enqueued, and the next is the first after now, not 10:01.
	if got := followingRun(tm, at, at.Add(time.Hour+10*time.Second)); !got.Equal(utc(t, "2026-05-01T11:01:00Z")) {
		t.Errorf("after an hour away: following %s, want 11:01", got)
	}
}

func TestScheduleRefusesMistakes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		s    Schedule
		want string
	}{
		{"Neither", Schedule{Task: "t"}, "give Cron"},
		{"Both", Schedule{Cron: "* * * * *", Every: time.Minute, Task: "t"}, "not both"},
		{"BadCron", Schedule{Cron: "61 * * * *", Task: "t"}, "cron"},
		{"TimezoneInTheExpression", Schedule{Cron: "CRON_TZ=Europe/Berlin 0 3 * * *", Task: "t"}, "Timezone"},
		{"TimezonePrefixWithoutSpace", Schedule{Cron: "TZ=Europe/Berlin", Task: "t"}, "Timezone"},
		{"EveryInTheExpression", Schedule{Cron: "@every 1m", Task: "t"}, "Every"},
		{"UnknownTimezone", Schedule{Cron: "0 3 * * *", Timezone: "Mars/Olympus", Task: "t"}, "IANA"},
		{"LocalTimezone", Schedule{Cron: "0 3 * * *", Timezone: "Local", Task: "t"}, "IANA"},
		{"TimezoneForAnInterval", Schedule{Every: time.Hour, Timezone: "Europe/Berlin", Task: "t"}, "real time"},
		{"ShortInterval", Schedule{Every: time.Millisecond * 500, Task: "t"}, "at least 1s"},
		{"NeverDue", Schedule{Cron: "0 0 30 2 *", Task: "t"}, "never"},
		{"BadKwargs", Schedule{Every: time.Hour, Task: "t", Kwargs: []byte(`[1]`)}, "kwargs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := newRegisteredSchedule("s", tt.s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	if _, err := newRegisteredSchedule("bad name!", Schedule{Every: time.Hour, Task: "t"}); err == nil {
		t.Error("a bad name was accepted")
	}
}
