package mql

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"charm.land/lipgloss/v2"

	"github.com/moonmq/moonmq/net/client"
)

// Table is a result set. Cells are nil (NULL), int64, Ratio, string, bool,
// Bytes (record keys and values), time.Time, []int32 or []client.Header; the
// renderers know how to show each in every format.
type Table struct {
	// Title, if set, is printed above the table in table format only.
	Title string
	// Kind names what a row is ("partition", "config") when a statement
	// prints tables of different rows. In JSON and CSV each row then
	// starts with a "kind" field, so a consumer of the one stream can tell
	// the rows apart; the table format shows Title instead.
	Kind    string
	Columns []string
	Rows    [][]any
}

// withKind returns the columns and rows the machine formats print: with a
// leading "kind" field when the table has a Kind.
func (t *Table) withKind() ([]string, [][]any) {
	if t.Kind == "" {
		return t.Columns, t.Rows
	}
	cols := append([]string{"kind"}, t.Columns...)
	rows := make([][]any, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = append([]any{t.Kind}, r...)
	}
	return cols, rows
}

// Bytes is a record key, value or header value: shown as text when it is
// printable UTF-8, quoted with escapes otherwise; in JSON a valid JSON
// document is embedded as JSON.
type Bytes []byte

// Ratio is a share in [0, 1] (a partition's dirty ratio): shown with two
// decimals, the precision of the configs it is compared with
// (min.cleanable.dirty.ratio), and right-aligned like a number; in JSON a
// number rounded the same way, so both formats say the same.
type Ratio float64

// rounded is r to two decimals.
func (r Ratio) rounded() float64 { return math.Round(float64(r)*100) / 100 }

// Renderer writes results in one format. Tables are written whole (so the
// table format can align columns); streams (SUBSCRIBE) row by row.
type Renderer struct {
	w      io.Writer
	status io.Writer // acknowledgements in json and csv; nil drops them
	format Format
	color  bool

	// streaming state
	stream     []string
	widths     []int
	numeric    []bool
	streamRows int
}

// NewRenderer returns a renderer writing to w. color enables ANSI styling
// in the table format; pass true only when w is a terminal.
func NewRenderer(w io.Writer, format Format, color bool) *Renderer {
	return &Renderer{w: w, format: format, color: color}
}

// SetStatus sets where acknowledgements (OK ...) go in the json and csv
// formats. Those formats are data streams for programs: a line that is not
// a row would break them, so acknowledgements never share the stream (nil
// drops them). In the table format, meant for people, they stay inline.
func (r *Renderer) SetStatus(w io.Writer) { r.status = w }

// SetFormat changes the output format.
func (r *Renderer) SetFormat(f Format) { r.format = f }

// Format returns the output format.
func (r *Renderer) Format() Format { return r.format }

var (
	styleHeader = lipgloss.NewStyle().Bold(true)
	styleNull   = lipgloss.NewStyle().Faint(true)
	styleOK     = lipgloss.NewStyle().Foreground(lipgloss.Green)
	styleError  = lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true)
	styleTitle  = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Cyan)
)

// OK prints a success message, "OK <msg>": with the results in the table
// format, to the status writer in json and csv (see SetStatus).
func (r *Renderer) OK(msg string) {
	switch {
	case r.format == FormatTable:
		r.line(r.style(styleOK, "OK") + " " + msg)
	case r.status != nil:
		fmt.Fprintln(r.status, "OK "+msg)
	}
}

// Error formats an error line for a terminal or log: "error: msg".
func (r *Renderer) Error(w io.Writer, msg string) {
	fmt.Fprintln(w, r.style(styleError, "error:")+" "+msg)
}

// Note prints an informational line in table format (ignored in json/csv,
// where it would break the stream).
func (r *Renderer) Note(msg string) {
	if r.format == FormatTable {
		r.line(msg)
	}
}

func (r *Renderer) style(s lipgloss.Style, text string) string {
	if !r.color {
		return text
	}
	return s.Render(text)
}

func (r *Renderer) line(s string) { fmt.Fprintln(r.w, s) }

// Table writes a whole table.
func (r *Renderer) Table(t *Table) {
	switch r.format {
	case FormatJSON:
		cols, rows := t.withKind()
		for _, row := range rows {
			r.jsonObject(cols, row)
		}
	case FormatCSV:
		cols, rows := t.withKind()
		r.csvRow(cols)
		for _, row := range rows {
			r.csvRow(cellsCSV(row))
		}
	default:
		r.table(t)
	}
}

func (r *Renderer) table(t *Table) {
	if t.Title != "" {
		r.line(r.style(styleTitle, t.Title))
	}
	cells := make([][]string, len(t.Rows))
	widths := make([]int, len(t.Columns))
	numeric := make([]bool, len(t.Columns))
	for i, c := range t.Columns {
		widths[i] = lipgloss.Width(c)
	}
	// A column is right-aligned when it holds numbers (and NULLs) only.
	hasNum := make([]bool, len(t.Columns))
	for i := range numeric {
		numeric[i] = true
	}
	for ri, row := range t.Rows {
		cells[ri] = make([]string, len(t.Columns))
		for ci := range t.Columns {
			var v any
			if ci < len(row) {
				v = row[ci]
			}
			cells[ri][ci] = cellText(v)
			widths[ci] = max(widths[ci], lipgloss.Width(cells[ri][ci]))
			switch v.(type) {
			case int64, Ratio:
				hasNum[ci] = true
			case nil:
			default:
				numeric[ci] = false
			}
		}
	}
	for i := range numeric {
		numeric[i] = numeric[i] && hasNum[i]
	}
	r.line(r.tableLine(t.Columns, widths, nil, true))
	dashes := make([]string, len(widths))
	for i, w := range widths {
		dashes[i] = strings.Repeat("-", w)
	}
	r.line(strings.Join(dashes, "  "))
	for ri, row := range cells {
		r.line(r.tableLine(row, widths, numeric, false, t.Rows[ri]...))
	}
	r.line(rowCount(len(t.Rows)))
}

// tableLine pads cells to widths (right-aligning numeric columns) and
// styles headers and NULLs; trailing spaces are trimmed.
func (r *Renderer) tableLine(cells []string, widths []int, numeric []bool, header bool, raw ...any) string {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString("  ")
		}
		pad := widths[i] - lipgloss.Width(c)
		styled := c
		switch {
		case header:
			styled = r.style(styleHeader, c)
		case i < len(raw) && raw[i] == nil:
			styled = r.style(styleNull, c)
		}
		if numeric != nil && numeric[i] {
			b.WriteString(strings.Repeat(" ", max(pad, 0)))
			b.WriteString(styled)
		} else {
			b.WriteString(styled)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", max(pad, 0)))
			}
		}
	}
	return strings.TrimRight(b.String(), " ")
}

func rowCount(n int) string {
	if n == 1 {
		return "(1 row)"
	}
	return fmt.Sprintf("(%d rows)", n)
}

// BeginStream starts a streamed table with these columns. minWidths are
// the widths the table format pads to, since later rows are unknown;
// numeric marks the columns that hold numbers, right-aligned as Table
// aligns them (a stream cannot look at its rows first).
func (r *Renderer) BeginStream(columns []string, minWidths []int, numeric []bool) {
	r.stream, r.streamRows = columns, 0
	r.numeric = make([]bool, len(columns))
	copy(r.numeric, numeric)
	r.widths = make([]int, len(columns))
	for i, c := range columns {
		r.widths[i] = lipgloss.Width(c)
		if i < len(minWidths) {
			r.widths[i] = max(r.widths[i], minWidths[i])
		}
	}
	switch r.format {
	case FormatCSV:
		r.csvRow(columns)
	case FormatTable:
		r.line(r.tableLine(columns, r.widths, nil, true))
		dashes := make([]string, len(r.widths))
		for i, w := range r.widths {
			dashes[i] = strings.Repeat("-", w)
		}
		r.line(strings.Join(dashes, "  "))
	}
}

// StreamRow writes one row of the current stream.
func (r *Renderer) StreamRow(row []any) {
	r.streamRows++
	switch r.format {
	case FormatJSON:
		r.jsonObject(r.stream, row)
	case FormatCSV:
		r.csvRow(cellsCSV(row))
	default:
		cells := make([]string, len(r.stream))
		for i := range cells {
			if i < len(row) {
				cells[i] = cellText(row[i])
			}
		}
		r.line(r.tableLine(cells, r.widths, r.numeric, false, row...))
	}
	if f, ok := r.w.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
}

// EndStream finishes the stream with the row count (table format).
func (r *Renderer) EndStream() {
	if r.format == FormatTable {
		r.line(rowCount(r.streamRows))
	}
	r.stream = nil
}

func (r *Renderer) csvRow(cells []string) {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	_ = cw.Write(cells)
	cw.Flush()
	_, _ = r.w.Write(buf.Bytes())
}

func cellsCSV(row []any) []string {
	out := make([]string, len(row))
	for i, v := range row {
		if v != nil {
			out[i] = cellText(v)
		}
	}
	return out
}

// jsonObject writes one JSON object with keys in column order.
func (r *Renderer) jsonObject(cols []string, row []any) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c)
		b.Write(k)
		b.WriteByte(':')
		var v any
		if i < len(row) {
			v = row[i]
		}
		b.Write(cellJSON(v))
	}
	b.WriteString("}\n")
	_, _ = r.w.Write(b.Bytes())
}

// cellText renders a cell for the table and CSV formats.
func cellText(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case string:
		return printable(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case Ratio:
		return strconv.FormatFloat(v.rounded(), 'f', 2, 64)
	case bool:
		return strconv.FormatBool(v)
	case Bytes:
		if v == nil {
			return "NULL"
		}
		return bytesText(v)
	case time.Time:
		if v.IsZero() {
			return "NULL"
		}
		return FormatTime(v)
	case []int32:
		parts := make([]string, len(v))
		for i, n := range v {
			parts[i] = strconv.Itoa(int(n))
		}
		return strings.Join(parts, ",")
	case []client.Header:
		parts := make([]string, len(v))
		for i, h := range v {
			parts[i] = printable(h.Key) + "=" + bytesText(h.Value)
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprint(v)
}

// cellJSON renders a cell as a JSON value.
func cellJSON(v any) []byte {
	var out any
	switch v := v.(type) {
	case nil:
		return []byte("null")
	case Ratio:
		out = v.rounded()
	case Bytes:
		if v == nil {
			return []byte("null")
		}
		return bytesJSON(v)
	case time.Time:
		if v.IsZero() {
			return []byte("null")
		}
		out = FormatTime(v)
	case []int32:
		if v == nil {
			v = []int32{}
		}
		out = v
	case []client.Header:
		var b bytes.Buffer
		b.WriteByte('{')
		for i, h := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(h.Key)
			b.Write(k)
			b.WriteByte(':')
			b.Write(bytesJSON(h.Value))
		}
		b.WriteByte('}')
		return b.Bytes()
	default:
		out = v
	}
	b, err := json.Marshal(out)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	return b
}

// FormatTime renders timestamps the same way everywhere: RFC 3339 in UTC
// with milliseconds (Kafka's timestamp resolution).
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// bytesText shows b as is when it is printable UTF-8, else as a quoted Go
// string with escapes ("\x00\xff").
func bytesText(b []byte) string {
	if utf8.Valid(b) && isPrintable(string(b)) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// printable quotes strings that would break a table line.
func printable(s string) string {
	if isPrintable(s) {
		return s
	}
	return strconv.Quote(s)
}

func isPrintable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// bytesJSON embeds a valid JSON document as JSON, otherwise a string (with
// the escaped form for invalid UTF-8, as in the table).
func bytesJSON(b []byte) []byte {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) > 0 && json.Valid(trimmed) {
		var buf bytes.Buffer
		if json.Compact(&buf, trimmed) == nil {
			return buf.Bytes()
		}
	}
	s := string(b)
	if !utf8.Valid(b) {
		s = strconv.Quote(s)
		s = s[1 : len(s)-1]
	}
	out, _ := json.Marshal(s)
	return out
}
