package correspondence_test

import (
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
)

func TestParseTimestamp(t *testing.T) {
	cases := []struct {
		name, s, code string
	}{
		{"ok", "2026-07-19T10:00:00.000Z", ""},
		{"29 feb leap year", "2024-02-29T00:00:00.000Z", ""},
		{"29 feb 2000", "2000-02-29T12:00:00.000Z", ""},
		{"29 feb 2023", "2023-02-29T00:00:00.000Z", "timestamp_invalid_date"},
		{"29 feb 1900", "1900-02-29T00:00:00.000Z", "timestamp_invalid_date"},
		{"30 feb", "2024-02-30T00:00:00.000Z", "timestamp_invalid_date"},
		{"31 apr", "2024-04-31T00:00:00.000Z", "timestamp_invalid_date"},
		{"month 13", "2024-13-01T00:00:00.000Z", "timestamp_invalid_date"},
		{"month 0", "2024-00-01T00:00:00.000Z", "timestamp_invalid_date"},
		{"day 0", "2024-01-00T00:00:00.000Z", "timestamp_invalid_date"},
		{"year 0001", "0001-01-01T00:00:00.000Z", ""},
		{"year 9999", "9999-12-31T23:59:59.999Z", ""},
		{"year 0000", "0000-01-01T00:00:00.000Z", "timestamp_year_zero_not_admitted"},
		{"24:00", "2024-01-01T24:00:00.000Z", "timestamp_hour_24_not_admitted"},
		{"hour 25", "2024-01-01T25:00:00.000Z", "timestamp_invalid_time"},
		{"minute 60", "2024-01-01T23:60:00.000Z", "timestamp_invalid_time"},
		{"leap second", "2016-12-31T23:59:60.000Z", "timestamp_leap_second_not_admitted"},
		{"second 61", "2016-12-31T23:59:61.000Z", "timestamp_invalid_time"},
		{"no ms", "2026-07-19T12:00:00Z", "timestamp_requires_milliseconds"},
		{"no ms no zone", "2026-07-19T12:00:00", "timestamp_requires_milliseconds"},
		{"no ms offset", "2026-07-19T12:00:00+01:00", "timestamp_requires_milliseconds"},
		{"one digit fraction", "2026-07-19T12:00:00.5Z", "timestamp_fraction_not_milliseconds"},
		{"micro", "2026-07-19T12:00:00.000000Z", "timestamp_fraction_not_milliseconds"},
		{"empty fraction", "2026-07-19T12:00:00.Z", "timestamp_invalid"},
		{"offset plus", "2026-07-19T12:00:00.000+01:00", "timestamp_offset_not_admitted"},
		{"offset zero", "2026-07-19T12:00:00.000+00:00", "timestamp_offset_not_admitted"},
		{"offset minus", "2026-07-19T12:00:00.000-00:00", "timestamp_offset_not_admitted"},
		{"lowercase z", "2026-07-19T12:00:00.000z", "timestamp_requires_uppercase_z"},
		{"no zone", "2026-07-19T12:00:00.000", "timestamp_invalid"},
		{"lowercase t", "2026-07-19t12:00:00.000Z", "timestamp_invalid"},
		{"space", "2026-07-19 12:00:00.000Z", "timestamp_invalid"},
		{"trailing", "2026-07-19T12:00:00.000Zx", "timestamp_invalid"},
		{"five digit year", "12026-07-19T12:00:00.000Z", "timestamp_invalid"},
		{"unicode digit", "２026-07-19T12:00:00.000Z", "timestamp_invalid"},
		{"empty", "", "timestamp_invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tm, code := correspondence.ParseTimestamp(tc.s)
			if code != tc.code {
				t.Fatalf("code = %q, want %q", code, tc.code)
			}
			if code == "" {
				if got := correspondence.FormatTimestamp(tm); got != tc.s {
					t.Errorf("round trip = %s", got)
				}
			} else if !tm.IsZero() {
				t.Errorf("time not zero on failure")
			}
			// The same rule applies to issued_at inside an event.
			issues := correspondence.Validate(edit(t, claimOpenEvent(t), "/issued_at", str(tc.s)))
			if tc.code == "" && issues != nil || tc.code != "" && !hasIssue(issues, "/issued_at", tc.code) {
				t.Errorf("issued_at issues = %+v", issues)
			}
		})
	}
	want := time.Date(2024, 2, 29, 13, 14, 15, 678e6, time.UTC)
	if tm, _ := correspondence.ParseTimestamp("2024-02-29T13:14:15.678Z"); !tm.Equal(want) {
		t.Errorf("parsed %v, want %v", tm, want)
	}
	if got := correspondence.FormatTimestamp(time.Date(2024, 2, 29, 14, 14, 15, 678999999, time.FixedZone("x", 3600))); got != "2024-02-29T13:14:15.678Z" {
		t.Errorf("FormatTimestamp = %s", got)
	}
}
