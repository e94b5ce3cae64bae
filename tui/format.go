package tui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// unknown is shown wherever a number is not known (the broker did not report
// it, or a rate has only one sample so far). A wrong number is worse than no
// number, so every formatter takes a "known" signal.
const unknown = "–"

// null is shown for a value that does not exist, as opposed to one not
// known: an empty group has no protocol, a record may have no key, a
// partition no member, a broker no rack. It is the marker MQL prints for
// the same values (SHOW GROUPS, DESCRIBE GROUP, SELECT), so the console
// and the dashboard agree on what a table cell without a value looks like.
const null = "NULL"

// ellipsis marks truncated text.
const ellipsis = "…"

// fmtCount renders a count compactly: exact below 100,000, then k/M/G/T with
// one decimal, so columns stay narrow without hiding small numbers.
func fmtCount(n int64) string {
	if n < 0 {
		return unknown
	}
	if n < 100_000 {
		return strconv.FormatInt(n, 10)
	}
	return compact(float64(n))
}

// compact renders v with a k/M/G/T suffix and at most one decimal.
func compact(v float64) string {
	units := []string{"", "k", "M", "G", "T", "P"}
	i := 0
	for math.Abs(v) >= 999.95 && i < len(units)-1 {
		v /= 1000
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	if v >= 99.95 {
		return strconv.FormatFloat(v, 'f', 0, 64) + units[i]
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}

// fmtRate renders a records-per-second rate; ok=false renders unknown.
func fmtRate(v float64, ok bool) string {
	switch {
	case !ok || math.IsNaN(v) || v < 0:
		return unknown
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v < 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return compact(v)
	}
}

// fmtPerSec is fmtRate with a "/s" unit when the rate is known.
func fmtPerSec(v float64, ok bool) string {
	s := fmtRate(v, ok)
	if s == unknown {
		return s
	}
	return s + "/s"
}

// fmtBytes renders a size in binary units; negative means unknown.
func fmtBytes(n int64) string {
	if n < 0 {
		return unknown
	}
	return fmtBytesF(float64(n))
}

func fmtBytesF(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for v >= 1023.95 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}

// fmtByteRate renders a bytes-per-second rate; ok=false renders unknown.
func fmtByteRate(v float64, ok bool) string {
	if !ok || math.IsNaN(v) || v < 0 {
		return unknown
	}
	return fmtBytesF(v) + "/s"
}

// fmtOffset renders an offset; negative offsets are "not known" in the
// client API.
func fmtOffset(n int64) string {
	if n < 0 {
		return unknown
	}
	return strconv.FormatInt(n, 10)
}

// fmtIDs renders a replica list like "1,2,3".
func fmtIDs(ids []int32) string {
	if len(ids) == 0 {
		return unknown
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(parts, ",")
}

// plural renders "1 member", "2 members".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// fmtPercent renders a share in [0, 1] (a dirty ratio) as a whole
// percentage; a share that is not zero never rounds to "0%".
func fmtPercent(r float64) string {
	switch {
	case math.IsNaN(r) || r < 0:
		return unknown
	case r > 0 && r < 0.005:
		return "<1%"
	}
	return strconv.FormatFloat(math.Round(r*100), 'f', 0, 64) + "%"
}

// fmtAge renders how long ago t was, coarsely.
func fmtAge(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	default:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
}

// fmtWindow renders a history window like "5m" or "90s".
func fmtWindow(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
}

// fmtTime renders a record timestamp in local time with milliseconds.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return unknown
	}
	return t.Local().Format("2006-01-02 15:04:05.000")
}

// width is the display width of s in cells, ignoring ANSI sequences.
func width(s string) int { return lipgloss.Width(s) }

// truncate cuts s to at most w cells, marking the cut with an ellipsis.
func truncate(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, ellipsis)
}

// fit truncates s to w cells and pads it with spaces to exactly w cells.
func fit(s string, w int) string {
	s = truncate(s, w)
	if pad := w - ansi.StringWidth(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// fitRight is fit with the text aligned to the right.
func fitRight(s string, w int) string {
	s = truncate(s, w)
	if pad := w - ansi.StringWidth(s); pad > 0 {
		s = strings.Repeat(" ", pad) + s
	}
	return s
}

// block fits s into exactly w x h cells: every line truncated and padded,
// missing lines added, extra lines dropped. Every view ends with this, so a
// frame always covers the whole screen and no stale cell survives a redraw.
func block(s string, w, h int) string {
	if h <= 0 || w <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	blank := strings.Repeat(" ", w)
	for len(lines) < h {
		lines = append(lines, blank)
	}
	return strings.Join(lines, "\n")
}

// oneLine makes arbitrary bytes safe for a single table cell: valid UTF-8
// text with control characters escaped, or hex for binary data.
func oneLine(b []byte) string {
	if b == nil {
		return "null"
	}
	if !isText(b) {
		return "0x" + hex.EncodeToString(b[:min(len(b), 64)])
	}
	var sb strings.Builder
	for _, r := range string(b) {
		switch {
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\r':
			sb.WriteString(`\r`)
		case !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
		default:
			sb.WriteRune(r)
		}
		if sb.Len() > 4096 {
			break // a cell never shows more; keep rendering cheap
		}
	}
	return sb.String()
}

// isText reports whether b looks like human-readable text: valid UTF-8 with
// few control characters.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	ctl := 0
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\t' && r != '\r' {
			ctl++
		}
	}
	return ctl == 0 || ctl*20 < len(b)
}

// prettyValue renders a record key or value for the detail pane: indented
// JSON when it is a valid JSON object or array (key order and numbers kept
// exactly as sent), text when it is text, and a hex dump otherwise. It also
// returns the format it chose. Control characters never reach the
// terminal: record data must not be able to move the cursor or recolour
// the screen.
func prettyValue(b []byte) (string, string) {
	if b == nil {
		return "null", "null"
	}
	if len(b) == 0 {
		return "(empty)", "empty"
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		var out bytes.Buffer
		if json.Indent(&out, trimmed, "", "  ") == nil {
			// Valid JSON has no raw control characters outside
			// whitespace, which Indent normalises.
			return out.String(), "json"
		}
	}
	if isText(b) {
		return safeText(string(b)), "text"
	}
	return hexDump(b), "binary"
}

// safeText keeps newlines and tabs, drops carriage returns and escapes every
// other control character (C0, DEL, C1) so text shows as written.
func safeText(s string) string {
	var sb strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\ufffd") {
		switch {
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case r == '\r':
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// hexDump renders b as offset / hex / ASCII lines, like hexdump -C, capped
// so a huge value cannot stall rendering.
func hexDump(b []byte) string {
	const maxBytes = 64 << 10
	truncated := len(b) > maxBytes
	if truncated {
		b = b[:maxBytes]
	}
	var sb strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(&sb, "%08x  ", off)
		for i := 0; i < 16; i++ {
			if i < len(line) {
				fmt.Fprintf(&sb, "%02x ", line[i])
			} else {
				sb.WriteString("   ")
			}
			if i == 7 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteString("|\n")
	}
	if truncated {
		sb.WriteString("… (first 64 KiB shown)\n")
	}
	return strings.TrimRight(sb.String(), "\n")
}
