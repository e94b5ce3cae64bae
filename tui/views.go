package tui

import (
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/moonmq/moonmq/net/client"
)

// viewID names a view; the root keeps one model per view.
type viewID int

const (
	vOverview viewID = iota
	vTopics
	vTopic
	vGroups
	vGroup
	vRecords
	numViews
)

// viewNames are the names `:` accepts and the tab line shows.
var viewNames = [numViews]string{"overview", "topics", "topic", "groups", "group", "records"}

// shared is the data every view renders from. The root owns it and updates
// it only inside Update, so views read it without locks.
type shared struct {
	th      *theme
	keys    *keyMap
	snap    *snapshot // last successful snapshot; nil before the first
	tr      *tracker
	refresh time.Duration
	now     time.Time // time of the last refresh or tick
	act     actions
}

// pane is the contract between the root model and a view model.
type pane interface {
	// setSize gives the view its body area.
	setSize(w, h int)
	// update handles a key press or scroll routed to the view (global
	// keys are taken by the root first) and view-specific data messages.
	update(msg tea.Msg) tea.Cmd
	// dataChanged tells the view the shared snapshot changed.
	dataChanged()
	// view renders exactly the body area.
	view() string
	// back handles Esc; it returns false when the root should go back to
	// the previous view instead.
	back() bool
	// footer lists the view's own keys for the footer line.
	footer() []key.Binding
	// crumb names the view in the tab line, e.g. "topic orders".
	crumb() string
}

// filterable views narrow their rows with `/`.
type filterable interface {
	filterText() string
	setFilter(string)
}

// sortable views reorder their rows with s / S.
type sortable interface {
	nextSort()
	reverseSort()
}

// scrollMsg is a mouse wheel turn routed to the active view.
type scrollMsg struct{ lines int }

// actions are what views ask of the root. They run synchronously inside
// the root's Update, so a key that opens a view has opened it before the
// next key is handled.
type actions interface {
	navigate(navMsg) tea.Cmd
	openPrompt(promptKind) tea.Cmd
	startTail(tailRequest) tea.Cmd
	stopTail(id int)
}

// navMsg describes a view to open.
type navMsg struct {
	to        viewID
	topic     string
	partition int32 // records: -1 for every partition
	group     string
	// start, if hasStart, is where the records view starts reading
	// instead of tailing the newest records.
	start    client.Position
	hasStart bool
	// reopen returns to a running tail of the same target instead of
	// restarting it (the records key, `:records` without a topic).
	reopen bool
}

// sortSpec is a view's sort state: a column index and a direction.
type sortSpec struct {
	col  int
	desc bool
}

// cycle moves to the next of n columns; numeric columns (numeric(col)
// true) start descending, since "largest first" is what one looks for.
func (s *sortSpec) cycle(n int, numeric func(int) bool) {
	s.col = (s.col + 1) % n
	s.desc = numeric(s.col)
}

// matchFilter reports whether any of the fields contains the filter,
// case-insensitively.
func matchFilter(filter string, fields ...string) bool {
	if filter == "" {
		return true
	}
	f := strings.ToLower(filter)
	for _, s := range fields {
		if strings.Contains(strings.ToLower(s), f) {
			return true
		}
	}
	return false
}

// sortRows sorts items by cmp (reversed for descending sorts), breaking ties
// by name so the order is stable across refreshes.
func sortRows[T any](items []T, desc bool, cmp func(a, b T) int, name func(T) string) {
	sort.SliceStable(items, func(i, j int) bool {
		c := cmp(items[i], items[j])
		if desc {
			c = -c
		}
		if c != 0 {
			return c < 0
		}
		return name(items[i]) < name(items[j])
	})
}

// cmpFloat orders rates; unlike cmp.Compare it treats NaN as equal to
// everything rather than smallest, so an undefined rate does not jump to the
// top of a sorted column.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sectionTitle renders a view section heading with optional right-hand info.
func sectionTitle(th *theme, title, info string, w int) string {
	s := th.section.Render(title)
	if info != "" {
		s += " " + th.dim.Render(info)
	}
	return fit(s, w)
}
