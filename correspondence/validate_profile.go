package correspondence

import (
	"time"

	"github.com/acrelay/acrelay/canonicaljson"
)

// timestamp checks an RFC3339-ms timestamp; orNull admits JSON null.
func (val *validator) timestamp(ptr string, v canonicaljson.Value, orNull bool) {
	if orNull && v.Kind == canonicaljson.Null {
		return
	}
	if v.Kind != canonicaljson.String {
		val.add(ptr, CodeInvalidType)
		return
	}
	if c := timestampCode(v.Str); c != "" {
		val.add(ptr, c)
	}
}

// ValidUUID reports whether s is a canonical lowercase hyphenated UUID
// (8-4-4-4-12 lowercase hex digits; any version or variant, spec §2).
func ValidUUID(s string) bool {
	if len(s) != uuidLen {
		return false
	}
	for i := 0; i < uuidLen; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isLowerHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func digits(s string, i, n int) (int, bool) {
	v := 0
	for k := i; k < i+n; k++ {
		c := s[k]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

type tsFields struct{ year, month, day, hour, min, sec, ms int }

// timestampFields checks s against spec §2 without allocating.
func timestampFields(s string) (f tsFields, code string) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return f, CodeTimestampInvalid
	}
	var ok [6]bool
	f.year, ok[0] = digits(s, 0, 4)
	f.month, ok[1] = digits(s, 5, 2)
	f.day, ok[2] = digits(s, 8, 2)
	f.hour, ok[3] = digits(s, 11, 2)
	f.min, ok[4] = digits(s, 14, 2)
	f.sec, ok[5] = digits(s, 17, 2)
	for _, o := range ok {
		if !o {
			return f, CodeTimestampInvalid
		}
	}
	rest := s[19:]
	if rest == "" || rest[0] == 'Z' || rest[0] == 'z' || rest[0] == '+' || rest[0] == '-' {
		return f, CodeTimestampMilliseconds
	}
	if rest[0] != '.' {
		return f, CodeTimestampInvalid
	}
	nd := 0
	for nd+1 < len(rest) && rest[nd+1] >= '0' && rest[nd+1] <= '9' {
		nd++
	}
	if nd != 3 {
		if nd == 0 {
			return f, CodeTimestampInvalid
		}
		return f, CodeTimestampFraction
	}
	f.ms, _ = digits(rest, 1, 3)
	switch tz := rest[4:]; {
	case tz == "Z":
	case tz == "z":
		return f, CodeTimestampUppercaseZ
	case len(tz) > 0 && (tz[0] == '+' || tz[0] == '-'):
		return f, CodeTimestampOffset
	default:
		return f, CodeTimestampInvalid
	}
	switch {
	case f.year == 0:
		return f, CodeTimestampYearZero
	case f.month < 1 || f.month > 12 || f.day < 1 || f.day > daysIn(f.year, f.month):
		return f, CodeTimestampInvalidDate
	case f.hour == 24:
		return f, CodeTimestampHour24
	case f.hour > 24 || f.min > 59:
		return f, CodeTimestampInvalidTime
	case f.sec == 60:
		return f, CodeTimestampLeapSecond
	case f.sec > 60:
		return f, CodeTimestampInvalidTime
	}
	return f, ""
}

func timestampCode(s string) string {
	_, code := timestampFields(s)
	return code
}

// ParseTimestamp parses an RFC3339-ms timestamp (spec §2): exactly
// YYYY-MM-DDTHH:mm:ss.sssZ, year 0001–9999, a real calendar date, hour
// 00–23, second 00–59. On failure t is zero and code is the issue code:
// timestamp_invalid, timestamp_requires_milliseconds,
// timestamp_fraction_not_milliseconds, timestamp_requires_uppercase_z,
// timestamp_offset_not_admitted, timestamp_year_zero_not_admitted,
// timestamp_invalid_date, timestamp_hour_24_not_admitted,
// timestamp_invalid_time or timestamp_leap_second_not_admitted.
func ParseTimestamp(s string) (t time.Time, code string) {
	f, code := timestampFields(s)
	if code != "" {
		return time.Time{}, code
	}
	return time.Date(f.year, time.Month(f.month), f.day, f.hour, f.min, f.sec, f.ms*int(time.Millisecond), time.UTC), ""
}

// FormatTimestamp renders t in UTC as YYYY-MM-DDTHH:mm:ss.sssZ, truncating
// below the millisecond.
func FormatTimestamp(t time.Time) string { return t.UTC().Format(rfc3339msLayout) }
