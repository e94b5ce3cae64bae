// Package when parses the points in time people type into MoonMQ's tools:
// MQL's TIMESTAMP '...' literals and the jump prompt of `moonmq top` share
// it, so both accept the same forms:
//
//	2026-05-01T12:00:00Z        RFC 3339 (fractional seconds and offsets allowed)
//	2026-05-01T12:00:00         the same without an offset: UTC
//	2026-05-01 12:00:00         a space instead of the T: UTC
//	2026-05-01                  a date: midnight UTC
//	5m, 1h30m, 2d, 90s ago      a duration before now (units ns us ms s m h d w;
//	                            a leading '-' or a trailing "ago" says the same)
//	@1714564800000              Unix milliseconds
//
// The current time is an argument, never read from a clock, so callers
// decide what "now" is and tests need no clock.
//
// It is a leaf: it imports no other MoonMQ package (internal/archtest).
package when

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Forms lists the accepted forms for error messages and prompts.
const Forms = "an RFC 3339 time like 2026-05-01T12:00:00Z, a date like 2026-05-01, " +
	"a duration ago like 5m or 1h30m, or @unix-millis"

// Error is a string that is not a time, and why.
type Error struct {
	Input  string // as given, without surrounding space
	Reason string // e.g. `unknown unit "x" (want ns, us, ms, s, m, h, d or w)`
}

func (e *Error) Error() string {
	if e.Input == "" {
		return e.Reason
	}
	return e.Input + ": " + e.Reason
}

// Reason is why err (from Parse) refused its input, without the input,
// for callers that name the input themselves.
func Reason(err error) string {
	if we, ok := errors.AsType[*Error](err); ok {
		return we.Reason
	}
	return err.Error()
}

func fail(in, format string, args ...any) *Error {
	return &Error{Input: in, Reason: fmt.Sprintf(format, args...)}
}

// layouts are tried in order after the relative and Unix forms.
var layouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"}

// Parse returns the time s names; durations count back from now.
// Surrounding space is ignored.
func Parse(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fail("", "empty time: want %s", Forms)
	}
	if ms, ok := strings.CutPrefix(s, "@"); ok {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return time.Time{}, fail(s, "want @ and a number of Unix milliseconds, like @1714564800000")
		}
		return time.UnixMilli(n), nil
	}
	for _, layout := range layouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if looksLikeDuration(s) {
		d, err := ParseAgo(s)
		if err != nil {
			return time.Time{}, err
		}
		return now.Add(-d), nil
	}
	return time.Time{}, fail(s, "want %s", Forms)
}

// looksLikeDuration reports whether s is made of what durations are made
// of (digits, '.', unit letters, a sign, "ago") and starts with a number,
// so its errors can be about the duration; a malformed date is not one.
func looksLikeDuration(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || !(s[0] >= '0' && s[0] <= '9' || s[0] == '.') {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r == '.' || r == ' ' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == 'µ' || r == 'μ') {
			return false
		}
	}
	return true
}

// units are the duration units; a unit is matched whole.
var units = []struct {
	name string
	d    time.Duration
}{
	{"ns", time.Nanosecond}, {"us", time.Microsecond}, {"µs", time.Microsecond}, {"μs", time.Microsecond},
	{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour},
	{"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour},
}

// ParseAgo parses how long ago: a sequence of numbers with units (1h30m,
// 1.5h, 2d; units in any case), optionally with a leading '-' or a trailing " ago". Every
// number needs a unit, so a bare number is never taken for a duration. The
// result is not negative.
func ParseAgo(s string) (time.Duration, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s)) // 5M, 2D and 1H are no surprise
	if rest, ok := strings.CutSuffix(s, "ago"); ok {
		s = strings.TrimSpace(rest)
	} else {
		s = strings.TrimPrefix(s, "-")
	}
	if s == "" {
		return 0, fail(strings.TrimSpace(orig), "want a duration like 5m or 1h30m")
	}
	var total float64 // nanoseconds; a float so 1.5h works, bounded below
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		num := s[:i]
		n, err := strconv.ParseFloat(num, 64)
		if num == "" || err != nil {
			return 0, fail(strings.TrimSpace(orig), "want a duration like 5m or 1h30m")
		}
		s = s[i:]
		j := 0
		for j < len(s) && !(s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		unit := strings.TrimSpace(s[:j]) // "1h 30m" and "5 m" read as written
		s = s[j:]
		var d time.Duration
		for _, u := range units {
			if u.name == unit {
				d = u.d
			}
		}
		if d == 0 {
			if unit == "" {
				return 0, fail(strings.TrimSpace(orig), "the number %s needs a unit (ns, us, ms, s, m, h, d or w)", num)
			}
			return 0, fail(strings.TrimSpace(orig), "unknown unit %q (want ns, us, ms, s, m, h, d or w)", unit)
		}
		total += n * float64(d)
	}
	if total >= math.MaxInt64 {
		return 0, fail(strings.TrimSpace(orig), "too long ago (at most about 292 years)")
	}
	return time.Duration(total), nil
}
