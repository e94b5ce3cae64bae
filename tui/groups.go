package tui

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/moonmq/moonmq/net/client"
)

// Groups table columns.
const (
	gcName = iota
	gcState
	gcProtocol
	gcMembers
	gcLag
	gcCommits
	gcTrend
	numGroupCols
)

// groupsModel is the sortable, filterable table of consumer groups with
// their lag and a lag-trend sparkline.
type groupsModel struct {
	d      *shared
	w, h   int
	tbl    table
	sort   sortSpec
	filter string
	shown  int
	total  int
	trendW int
}

func newGroups(d *shared) *groupsModel {
	m := &groupsModel{d: d}
	m.tbl = newTable(d.th, []column{
		gcName:     {title: "GROUP", min: 16, flex: 2},
		gcState:    {title: "STATE", min: 11},
		gcProtocol: {title: "PROTOCOL", min: 10, flex: 2},
		gcMembers:  {title: "MEMBERS", min: 7, right: true},
		gcLag:      {title: "LAG", min: 8, right: true},
		gcCommits:  {title: "COMMIT/s", min: 8, right: true},
		gcTrend:    {title: "LAG TREND", min: 10, flex: 1},
	})
	m.tbl.empty = "no consumer groups"
	m.tbl.sortCol = gcName
	return m
}

func (m *groupsModel) crumb() string { return "groups" }

func (m *groupsModel) setSize(w, h int) {
	m.w, m.h = w, h
	m.tbl.setSize(w, max(h-1, 0))
	m.trendW = m.tbl.widths()[gcTrend]
	m.dataChanged() // sparkline width depends on the column width
}

func (m *groupsModel) footer() []key.Binding {
	k := m.d.keys
	return []key.Binding{k.Open, k.Filter, k.Sort, k.Back, k.Help, k.Quit}
}

func (m *groupsModel) back() bool {
	if m.filter != "" {
		m.setFilter("")
		return true
	}
	return false
}

func (m *groupsModel) filterText() string { return m.filter }

func (m *groupsModel) setFilter(f string) {
	m.filter = f
	m.dataChanged()
}

func (m *groupsModel) nextSort() {
	m.sort.cycle(numGroupCols-1, func(c int) bool { return c == gcMembers || c == gcLag || c == gcCommits })
	m.dataChanged()
}

func (m *groupsModel) reverseSort() {
	m.sort.desc = !m.sort.desc
	m.dataChanged()
}

func (m *groupsModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case scrollMsg:
		m.tbl.move(msg.lines)
	case tea.KeyPressMsg:
		if m.tbl.handleNav(msg, m.d.keys) {
			return nil
		}
		if r, ok := m.tbl.selected(); ok && key.Matches(msg, m.d.keys.Open) {
			return m.d.act.navigate(navMsg{to: vGroup, group: r.key})
		}
	}
	return nil
}

// groupRow is one group with the numbers it sorts by.
type groupRow struct {
	groupState
	members int   // -1 unknown
	lag     int64 // -1 unknown
	commits float64
	commOK  bool
}

func (m *groupsModel) dataChanged() {
	s, tr := m.d.snap, m.d.tr
	if s == nil {
		return
	}
	rows := make([]groupRow, 0, len(s.groups))
	for _, g := range s.groups {
		if !matchFilter(m.filter, g.summary.Name, g.summary.State) {
			continue
		}
		r := groupRow{groupState: g, members: -1, lag: -1}
		if g.desc != nil {
			r.members, r.lag = len(g.desc.Members), g.desc.TotalLag
		}
		if tr.outKnown {
			r.commits, r.commOK = tr.groupCommit[g.summary.Name]
		}
		rows = append(rows, r)
	}
	m.shown, m.total = len(rows), len(s.groups)
	sortRows(rows, m.sort.desc, func(a, b groupRow) int {
		switch m.sort.col {
		case gcState:
			return strings.Compare(a.summary.State, b.summary.State)
		case gcProtocol:
			return strings.Compare(protocolOf(a.groupState), protocolOf(b.groupState))
		case gcMembers:
			return cmp.Compare(a.members, b.members)
		case gcLag:
			return cmp.Compare(a.lag, b.lag)
		case gcCommits:
			return cmpFloat(a.commits, b.commits)
		}
		return strings.Compare(a.summary.Name, b.summary.Name)
	}, func(r groupRow) string { return r.summary.Name })
	trs := make([]tableRow, len(rows))
	for i, r := range rows {
		members, lag := unknown, unknown
		if r.members >= 0 {
			members, lag = strconv.Itoa(r.members), fmtCount(r.lag)
		}
		state := r.summary.State
		if state == "" {
			state = unknown
		}
		if r.err != nil {
			lag = "error"
		}
		trend := ""
		if h := tr.lagHist[r.summary.Name]; h != nil && m.trendW > 0 {
			trend = sparkline(h, m.d.now, tr.window, 3*m.d.refresh, m.trendW)
		}
		trs[i] = tableRow{key: r.summary.Name, dim: state == client.GroupStateEmpty || state == client.GroupStateDead, cells: []string{
			gcName:     r.summary.Name,
			gcState:    state,
			gcProtocol: protocolOf(r.groupState),
			gcMembers:  members,
			gcLag:      lag,
			gcCommits:  fmtRate(r.commits, r.commOK),
			gcTrend:    trend,
		}}
	}
	m.tbl.sortCol, m.tbl.sortDesc = m.sort.col, m.sort.desc
	switch {
	case s.groupsErr != nil:
		m.tbl.empty = "cannot list groups: " + explain(s.groupsErr)
	case m.filter != "":
		m.tbl.empty = fmt.Sprintf("no group matches %q (esc clears the filter)", m.filter)
	default:
		m.tbl.empty = "no consumer groups"
	}
	m.tbl.setRows(trs)
}

// protocolOf renders the group's protocol, its partition assignor (range,
// cooperative-sticky), the value MQL's SHOW GROUPS shows: NULL when the
// group has none (an empty group), – when it could not be described.
func protocolOf(g groupState) string {
	switch {
	case g.desc == nil:
		return unknown
	case g.desc.Protocol == "":
		return null
	}
	return g.desc.Protocol
}

func (m *groupsModel) view() string {
	th := m.d.th
	if m.d.snap == nil {
		return block(th.dim.Render(" waiting for the first answer from the broker …"), m.w, m.h)
	}
	info := strconv.Itoa(m.total)
	if m.filter != "" {
		info = fmt.Sprintf("%d of %d, filter %q", m.shown, m.total, m.filter)
	}
	info += " · lag trend over the last " + fmtWindow(m.d.tr.window)
	if si := m.tbl.scrollInfo(); si != "" {
		info += " · rows " + si
	}
	return block(sectionTitle(th, "Consumer groups", info, m.w)+"\n"+m.tbl.view(), m.w, m.h)
}
