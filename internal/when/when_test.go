package when

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func TestParse(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2026-05-01T11:00:00Z":      now.Add(-time.Hour),
		"2026-05-01T13:00:00+02:00": now.Add(-time.Hour),
		"2026-05-01T11:00:00.250Z":  now.Add(-time.Hour + 250*time.Millisecond),
		"2026-05-01T11:00:00":       now.Add(-time.Hour),
		"2026-05-01 11:00:00":       now.Add(-time.Hour),
		"2026-05-01":                now.Add(-12 * time.Hour),
		"  2026-05-01 ":             now.Add(-12 * time.Hour),
		"5m":                        now.Add(-5 * time.Minute),
		"-5m":                       now.Add(-5 * time.Minute),
		"5m ago":                    now.Add(-5 * time.Minute),
		"1h30m":                     now.Add(-90 * time.Minute),
		"1h 30m":                    now.Add(-90 * time.Minute),
		"5 m":                       now.Add(-5 * time.Minute),
		"1.5h":                      now.Add(-90 * time.Minute),
		"2d":                        now.Add(-48 * time.Hour),
		"1w":                        now.Add(-7 * 24 * time.Hour),
		"500ms":                     now.Add(-500 * time.Millisecond),
		"0s":                        now,
		"@0":                        time.UnixMilli(0),
		"@1777636800000":            time.UnixMilli(1777636800000),
		"@-1000":                    time.UnixMilli(-1000),
	} {
		got, err := Parse(in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%q: got %v, want %v", in, got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for in, msg := range map[string]string{
		"":           "empty time",
		"yesterday":  "yesterday: want an RFC 3339 time",
		"5":          "the number 5 needs a unit",
		"5x":         `unknown unit "x"`,
		"1h30":       "the number 30 needs a unit",
		"@soon":      "want @ and a number of Unix milliseconds",
		"2026-13-01": "2026-13-01: want an RFC 3339 time",
		"999999d":    "too long ago",
		"ago":        "ago: want an RFC 3339 time",
		"- ago":      "- ago: want an RFC 3339 time",
	} {
		_, err := Parse(in, now)
		require.Error(t, err, in)
		require.Contains(t, err.Error(), msg, in)
		var we *Error
		require.ErrorAs(t, err, &we)
		require.Equal(t, strings.TrimSpace(in), we.Input)
	}
}

// The result never depends on anything but the arguments.
func TestParseUsesOnlyNow(t *testing.T) {
	a, err := Parse("10m", now)
	require.NoError(t, err)
	b, err := Parse("10m", now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, time.Hour, b.Sub(a))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"5m", "2026-05-01", "@0", "1h30m ago", "-1.5h", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Parse(s, now)
		if d, err := ParseAgo(s); err == nil && d < 0 {
			t.Fatalf("ParseAgo(%q) = %v, negative", s, d)
		}
	})
}
