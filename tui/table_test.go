package tui

import (
	"strconv"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"
)

func testTable(n int) table {
	tb := newTable(defaultTheme(), []column{
		{title: "NAME", min: 6, flex: 2},
		{title: "N", min: 4, right: true},
		{title: "NOTE", min: 6, flex: 1},
	})
	rows := make([]tableRow, n)
	for i := range rows {
		rows[i] = tableRow{key: "k" + strconv.Itoa(i), cells: []string{"row-" + strconv.Itoa(i), strconv.Itoa(i), "note"}}
	}
	tb.setRows(rows)
	return tb
}

func TestTableWidths(t *testing.T) {
	tb := testTable(1)
	for _, w := range []int{10, 19, 20, 21, 47, 80, 200} {
		tb.setSize(w, 5)
		ws := tb.widths()
		total := 1 + len(ws) - 1
		for _, x := range ws {
			total += x
		}
		if w >= 19 {
			require.Equal(t, w, total, "width %d: columns fill the line exactly (%v)", w, ws)
		}
		requireFrame(t, tb.view(), w, 5)
	}
	tb.setSize(80, 5)
	ws := tb.widths()
	require.Equal(t, 4, ws[1], "fixed columns keep their width")
	require.Greater(t, ws[0], ws[2], "flex 2 gets more than flex 1")
}

func TestTableCursorAndScroll(t *testing.T) {
	tb := testTable(20)
	tb.setSize(40, 6) // header + 5 rows
	require.Equal(t, 5, tb.visible())
	tb.move(7)
	require.Equal(t, 7, tb.cursor)
	require.Equal(t, 3, tb.offset, "the cursor stays on screen")
	require.Equal(t, "4-8 of 20", tb.scrollInfo())
	tb.move(-100)
	require.Equal(t, 0, tb.cursor)
	require.Equal(t, 0, tb.offset)
	tb.bottom()
	require.Equal(t, 19, tb.cursor)
	require.True(t, tb.atBottom())
	require.Equal(t, 15, tb.offset)

	// New rows: the cursor follows its key.
	tb.cursor = 3
	tb.clamp()
	rows := append([]tableRow{{key: "new", cells: []string{"new"}}}, tb.rows...)
	tb.setRows(rows)
	require.Equal(t, 4, tb.cursor)
	r, _ := tb.selected()
	require.Equal(t, "k3", r.key)

	// The selected row disappears: the cursor stays in range.
	tb.setRows(rows[:2])
	require.Equal(t, 1, tb.cursor)
	tb.setRows(nil)
	_, ok := tb.selected()
	require.False(t, ok)
	tb.move(1)
	tb.bottom()
	require.Equal(t, 0, tb.cursor)

	// Shrinking the viewport keeps the cursor visible.
	tb = testTable(20)
	tb.setSize(40, 20)
	tb.move(15)
	tb.setSize(40, 4)
	require.GreaterOrEqual(t, tb.cursor, tb.offset)
	require.Less(t, tb.cursor, tb.offset+tb.visible())
}

func TestTableRendering(t *testing.T) {
	tb := testTable(3)
	tb.rows[1].cells[0] = "a-very-long-name-that-does-not-fit"
	tb.sortCol, tb.sortDesc = 1, true
	tb.setSize(30, 5)
	require.Equal(t, []string{
		" NAME            N▼ NOTE",
		" row-0            0 note",
		" a-very-long-…    1 note",
		" row-2            2 note",
		"",
	}, strings.Split(plain(tb.view()), "\n"))
	tb.setRows(nil)
	tb.empty = "nothing here"
	require.Contains(t, ansi.Strip(tb.view()), "nothing here")
	tb.setSize(0, 0)
	require.Empty(t, tb.view())
}
