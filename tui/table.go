package tui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// column describes one table column. Widths are in terminal cells.
type column struct {
	title string
	min   int  // width the column gets before spare space is shared out
	flex  int  // share of spare (or missing) width; 0 keeps the column at min
	right bool // right-align (numbers)
}

// tableRow is one row; key identifies it across refreshes so the cursor
// stays on the same item when rows are re-sorted or new rows arrive.
type tableRow struct {
	key   string
	cells []string
	dim   bool
}

// table is the dashboard's list widget: fixed header, a cursor that stays on
// its row across refreshes, scrolling, flexible column widths and ellipsis
// truncation. Sorting and filtering belong to the view that owns the data:
// it hands the table rows already in display order.
type table struct {
	th      *theme
	cols    []column
	rows    []tableRow
	cursor  int
	offset  int
	w, h    int // h counts the header line
	focused bool
	// sortCol/sortDesc only decorate the header; -1 shows no indicator.
	sortCol  int
	sortDesc bool
	// empty is shown in place of rows when there are none.
	empty string
}

func newTable(th *theme, cols []column) table {
	return table{th: th, cols: cols, focused: true, sortCol: -1}
}

func (t *table) setSize(w, h int) {
	t.w, t.h = max(w, 0), max(h, 0)
	t.clamp()
}

// setRows replaces the rows, keeping the cursor on the row with the same key
// when it is still there.
func (t *table) setRows(rows []tableRow) {
	var selKey string
	if r, ok := t.selected(); ok {
		selKey = r.key
	}
	t.rows = rows
	if selKey != "" {
		for i, r := range rows {
			if r.key == selKey {
				t.cursor = i
				break
			}
		}
	}
	t.clamp()
}

// visible is the number of row lines below the header.
func (t *table) visible() int { return max(t.h-1, 0) }

func (t *table) clamp() {
	if t.cursor >= len(t.rows) {
		t.cursor = len(t.rows) - 1
	}
	if t.cursor < 0 {
		t.cursor = 0
	}
	vis := t.visible()
	if vis <= 0 {
		t.offset = t.cursor
		return
	}
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+vis {
		t.offset = t.cursor - vis + 1
	}
	// Do not leave blank lines at the bottom when rows could fill them.
	if maxOff := max(len(t.rows)-vis, 0); t.offset > maxOff {
		t.offset = maxOff
	}
	if t.offset < 0 {
		t.offset = 0
	}
}

func (t *table) move(n int) {
	t.cursor += n
	t.clamp()
}

func (t *table) top()    { t.cursor = 0; t.clamp() }
func (t *table) bottom() { t.cursor = len(t.rows) - 1; t.clamp() }

// atBottom reports whether the cursor is on the last row (or there are none).
func (t *table) atBottom() bool { return t.cursor >= len(t.rows)-1 }

func (t *table) selected() (tableRow, bool) {
	if t.cursor < 0 || t.cursor >= len(t.rows) {
		return tableRow{}, false
	}
	return t.rows[t.cursor], true
}

// handleNav applies a navigation key; it reports whether the key was one.
func (t *table) handleNav(msg tea.KeyPressMsg, km *keyMap) bool {
	switch {
	case key.Matches(msg, km.Up):
		t.move(-1)
	case key.Matches(msg, km.Down):
		t.move(1)
	case key.Matches(msg, km.PageUp):
		t.move(-max(t.visible()-1, 1))
	case key.Matches(msg, km.PageDown):
		t.move(max(t.visible()-1, 1))
	case key.Matches(msg, km.Top):
		t.top()
	case key.Matches(msg, km.Bottom):
		t.bottom()
	default:
		return false
	}
	return true
}

// widths shares the table width between columns: every column gets its
// minimum, then flexible columns share what is left (or give back what is
// missing, down to 3 cells each) in proportion to their flex weights.
func (t *table) widths() []int {
	ws := make([]int, len(t.cols))
	total, flex := 1, 0 // one cell of left margin
	for i, c := range t.cols {
		ws[i] = c.min
		total += c.min
		if i > 0 {
			total++ // separator
		}
		flex += c.flex
	}
	spare := t.w - total
	if flex == 0 || spare == 0 {
		return ws
	}
	if spare > 0 {
		given := 0
		last := -1
		for i, c := range t.cols {
			if c.flex > 0 {
				add := spare * c.flex / flex
				ws[i] += add
				given += add
				last = i
			}
		}
		ws[last] += spare - given // rounding remainder
		return ws
	}
	// Too narrow: shrink flexible columns, widest first, down to 3 cells.
	missing := -spare
	for missing > 0 {
		widest := -1
		for i, c := range t.cols {
			if c.flex > 0 && ws[i] > 3 && (widest < 0 || ws[i] > ws[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break // block() truncates the rest
		}
		ws[widest]--
		missing--
	}
	return ws
}

func (t *table) renderCells(cells []string, ws []int) string {
	var sb strings.Builder
	sb.WriteByte(' ')
	for i, c := range t.cols {
		if i > 0 {
			sb.WriteByte(' ')
		}
		v := ""
		if i < len(cells) {
			v = cells[i]
		}
		if c.right {
			sb.WriteString(fitRight(v, ws[i]))
		} else {
			sb.WriteString(fit(v, ws[i]))
		}
	}
	return sb.String()
}

// view renders exactly w x h cells.
func (t *table) view() string {
	if t.h <= 0 || t.w <= 0 {
		return ""
	}
	ws := t.widths()
	titles := make([]string, len(t.cols))
	for i, c := range t.cols {
		titles[i] = c.title
		if i == t.sortCol {
			if t.sortDesc {
				titles[i] += "▼"
			} else {
				titles[i] += "▲"
			}
		}
	}
	lines := []string{t.th.colHeader.Render(fit(t.renderCells(titles, ws), t.w))}
	if len(t.rows) == 0 && t.empty != "" && t.visible() > 0 {
		lines = append(lines, t.th.dim.Render(fit(" "+t.empty, t.w)))
	}
	end := min(t.offset+t.visible(), len(t.rows))
	for i := t.offset; i < end; i++ {
		line := fit(t.renderCells(t.rows[i].cells, ws), t.w)
		switch {
		case i == t.cursor && t.focused:
			line = t.th.selected.Render(line)
		case i == t.cursor:
			line = t.th.selBlur.Render(line)
		case t.rows[i].dim:
			line = t.th.dim.Render(line)
		}
		lines = append(lines, line)
	}
	return block(strings.Join(lines, "\n"), t.w, t.h)
}

// scrollInfo renders "12-30 of 140" for a section title, or "" when every row
// fits.
func (t *table) scrollInfo() string {
	if len(t.rows) <= t.visible() {
		return ""
	}
	end := min(t.offset+t.visible(), len(t.rows))
	return strconv.Itoa(t.offset+1) + "-" + strconv.Itoa(end) + " of " + strconv.Itoa(len(t.rows))
}
