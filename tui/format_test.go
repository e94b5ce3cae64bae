package tui

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"
)

func TestFormatNumbers(t *testing.T) {
	for n, want := range map[int64]string{-1: "–", 0: "0", 99_999: "99999", 100_000: "100k", 123_456: "123k",
		1_250_000: "1.2M", 999_960: "1.0M", 7_000_000_000: "7.0G"} {
		require.Equal(t, want, fmtCount(n), "%d", n)
	}
	for _, c := range []struct {
		v    float64
		ok   bool
		want string
	}{
		{0, true, "0"}, {0.25, true, "0.2"}, {9.96, true, "10.0"}, {12.4, true, "12"}, {999.4, true, "999"},
		{1500, true, "1.5k"}, {2_500_000, true, "2.5M"}, {5, false, "–"}, {math.NaN(), true, "–"}, {-1, true, "–"},
	} {
		require.Equal(t, c.want, fmtRate(c.v, c.ok), "%v", c.v)
	}
	require.Equal(t, "12/s", fmtPerSec(12, true))
	require.Equal(t, "–", fmtPerSec(12, false))
	for n, want := range map[int64]string{-1: "–", 0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 52_428_800: "50.0 MiB",
		1 << 40: "1.0 TiB"} {
		require.Equal(t, want, fmtBytes(n), "%d", n)
	}
	require.Equal(t, "1.5 KiB/s", fmtByteRate(1536, true))
	require.Equal(t, "–", fmtByteRate(1536, false))
	require.Equal(t, "1,2,3", fmtIDs([]int32{1, 2, 3}))
	require.Equal(t, "–", fmtIDs(nil))
	require.Equal(t, "5m", fmtWindow(5*time.Minute))
	require.Equal(t, "90s", fmtWindow(90*time.Second))
	require.Equal(t, "just now", fmtAge(0))
	require.Equal(t, "2m ago", fmtAge(150*time.Second))
}

func TestFitAndTruncate(t *testing.T) {
	require.Equal(t, "orde…", truncate("orders", 5))
	require.Equal(t, "orders", truncate("orders", 6))
	require.Equal(t, "", truncate("orders", 0))
	require.Equal(t, "ab  ", fit("ab", 4))
	require.Equal(t, "  ab", fitRight("ab", 4))
	// Wide runes count as two cells; the result never overflows.
	for w := 0; w < 8; w++ {
		got := fit("日本語テキスト", w)
		require.Equal(t, w, ansi.StringWidth(got), "width %d: %q", w, got)
	}
	// Styled text is measured without its escape codes.
	styled := "\x1b[1mbold text\x1b[0m"
	require.Equal(t, 6, ansi.StringWidth(fit(styled, 6)))
	b := block("a\nbb\nccc", 2, 4)
	require.Equal(t, "a \nbb\nc…\n  ", ansi.Strip(b))
	require.Empty(t, block("x", 0, 3))
}

func TestRecordRendering(t *testing.T) {
	require.Equal(t, "null", oneLine(nil))
	require.Equal(t, `a\nb\tc`, oneLine([]byte("a\nb\tc")))
	require.Equal(t, "0x00ff10", oneLine([]byte{0, 0xff, 0x10}))
	require.Equal(t, `a line of text with an \x1b[31m escape in it`, oneLine([]byte("a line of text with an \x1b[31m escape in it")),
		"escape sequences in data never reach the terminal")
	long := oneLine([]byte(strings.Repeat("x", 100_000)))
	require.Less(t, len(long), 5000)

	v, f := prettyValue([]byte(`{"b":1,"a":[true,null]}`))
	require.Equal(t, "json", f)
	require.Equal(t, "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null\n  ]\n}", v, "key order kept")
	v, _ = prettyValue([]byte(`{"id":12345678901234567890}`))
	require.Contains(t, v, "12345678901234567890", "big numbers are not rounded")
	v, f = prettyValue([]byte("a long enough line with an \x1b[2J escape and a \u009b C1"))
	require.Equal(t, "text", f)
	require.Equal(t, `a long enough line with an \x1b[2J escape and a \u009b C1`, v)
	v, f = prettyValue([]byte("hello\r\nworld"))
	require.Equal(t, "text", f)
	require.Equal(t, "hello\nworld", v)
	_, f = prettyValue([]byte(`{"broken":`))
	require.Equal(t, "text", f, "invalid JSON is shown as text")
	v, f = prettyValue([]byte{0x00, 0x01, 'A', 0xff})
	require.Equal(t, "binary", f)
	require.Equal(t, "00000000  00 01 41 ff                                       |..A.|", v)
	v, f = prettyValue(nil)
	require.Equal(t, "null", f)
	require.Equal(t, "null", v)
	_, f = prettyValue([]byte{})
	require.Equal(t, "empty", f)
	big := hexDump(make([]byte, 100<<10))
	require.Contains(t, big, "first 64 KiB shown")
}
