package tui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/moonmq/moonmq/net/client"
)

// groupDetailModel shows one group: members with their assignments, and per
// partition the committed offset, end offset and lag. Its data comes with
// every snapshot (the refresh describes every group for the lag columns).
type groupDetailModel struct {
	d       *shared
	w, h    int
	group   string
	members table
	offsets table
	focus   int // 0 offsets, 1 members
	// committed maps an offsets row key to its committed offset (-1:
	// none), for opening the records the group has yet to consume.
	committed map[string]int64
}

func newGroupDetail(d *shared) *groupDetailModel {
	m := &groupDetailModel{d: d}
	m.members = newTable(d.th, []column{
		{title: "MEMBER", min: 20, flex: 2},
		{title: "CLIENT", min: 12, flex: 1},
		{title: "HOST", min: 12, flex: 1},
		{title: "ASSIGNED", min: 12, flex: 2},
	})
	m.members.empty = "no members (the group is empty)"
	m.offsets = newTable(d.th, []column{
		{title: "TOPIC", min: 16, flex: 2},
		{title: "P", min: 3, right: true},
		{title: "COMMITTED", min: 10, right: true},
		{title: "END", min: 10, right: true},
		{title: "LAG", min: 8, right: true},
		{title: "MEMBER", min: 12, flex: 1},
	})
	m.offsets.empty = "no committed offsets"
	m.setFocus(0)
	return m
}

func (m *groupDetailModel) open(group string) {
	if group != m.group {
		m.group = group
		m.members.cursor, m.offsets.cursor = 0, 0
	}
	m.setFocus(0)
	m.dataChanged()
}

func (m *groupDetailModel) crumb() string { return "group " + m.group }

func (m *groupDetailModel) setSize(w, h int) {
	m.w, m.h = w, h
	m.layout()
}

func (m *groupDetailModel) layout() {
	avail := max(m.h-4, 2) // two header lines and two section titles
	mh := min(len(m.members.rows)+1, avail*2/5)
	mh = max(mh, min(2, avail))
	m.members.setSize(m.w, mh)
	m.offsets.setSize(m.w, avail-mh)
}

func (m *groupDetailModel) setFocus(f int) {
	m.focus = f
	m.offsets.focused = f == 0
	m.members.focused = f == 1
}

func (m *groupDetailModel) active() *table {
	if m.focus == 1 {
		return &m.members
	}
	return &m.offsets
}

func (m *groupDetailModel) footer() []key.Binding {
	k := m.d.keys
	return []key.Binding{k.Open, k.Focus, k.Back, k.Help, k.Quit}
}

func (m *groupDetailModel) back() bool { return false }

func (m *groupDetailModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case scrollMsg:
		m.active().move(msg.lines)
	case tea.KeyPressMsg:
		if key.Matches(msg, m.d.keys.Focus) {
			m.setFocus(1 - m.focus)
			return nil
		}
		if m.active().handleNav(msg, m.d.keys) {
			return nil
		}
		// Enter on an offset row shows the records the group has not
		// consumed yet, starting at its committed offset.
		if key.Matches(msg, m.d.keys.Open) && m.focus == 0 {
			if r, ok := m.offsets.selected(); ok {
				topic, part, ok := strings.Cut(r.key, "\x00")
				p, err := strconv.ParseInt(part, 10, 32)
				if ok && err == nil {
					n := navMsg{to: vRecords, topic: topic, partition: int32(p)}
					if c, ok := m.committed[r.key]; ok && c >= 0 {
						n.start, n.hasStart = client.Offset(c), true
					}
					return m.d.act.navigate(n)
				}
			}
		}
	}
	return nil
}

func (m *groupDetailModel) state() (groupState, bool) {
	if m.d.snap == nil {
		return groupState{}, false
	}
	return m.d.snap.group(m.group)
}

func (m *groupDetailModel) dataChanged() {
	g, ok := m.state()
	if !ok || g.desc == nil {
		m.members.setRows(nil)
		m.offsets.setRows(nil)
		m.layout()
		return
	}
	d := g.desc
	mrows := make([]tableRow, 0, len(d.Members))
	for _, mem := range d.Members {
		var parts []string
		for _, a := range mem.Assigned {
			ps := make([]string, len(a.Partitions))
			for i, p := range a.Partitions {
				ps[i] = strconv.Itoa(int(p))
			}
			parts = append(parts, a.Topic+"["+strings.Join(ps, ",")+"]")
		}
		id := mem.ID
		if mem.InstanceID != "" {
			id += " (" + mem.InstanceID + ")"
		}
		assigned := strings.Join(parts, " ")
		if assigned == "" {
			assigned = null
		}
		mrows = append(mrows, tableRow{key: mem.ID, cells: []string{id, mem.ClientID, mem.Host, assigned}})
	}
	m.members.setRows(mrows)

	orows := make([]tableRow, 0, len(d.Offsets))
	m.committed = make(map[string]int64, len(d.Offsets))
	for _, o := range d.Offsets {
		lag := fmtCount(o.Lag)
		if o.Err != nil {
			lag = "error"
		}
		member := o.MemberID
		if member == "" {
			member = null
		}
		k := o.Topic + "\x00" + strconv.Itoa(int(o.Partition))
		m.committed[k] = o.Committed
		orows = append(orows, tableRow{
			key: k,
			cells: []string{o.Topic, strconv.Itoa(int(o.Partition)), fmtOffset(o.Committed), fmtOffset(o.End),
				lag, member},
		})
	}
	m.offsets.setRows(orows)
	m.layout()
}

func (m *groupDetailModel) view() string {
	th := m.d.th
	g, ok := m.state()
	var lines []string
	switch {
	case m.d.snap == nil:
		lines = append(lines, th.dim.Render(" waiting for the first answer from the broker …"))
	case !ok:
		lines = append(lines, sectionTitle(th, "Group "+m.group, "", m.w),
			th.warn.Render(" the group no longer exists (esc goes back)"))
	case g.desc == nil:
		msg := "not described yet"
		if g.err != nil {
			msg = "cannot describe the group: " + explain(g.err)
		}
		lines = append(lines, sectionTitle(th, "Group "+m.group, g.summary.State, m.w), th.err.Render(" "+msg))
	default:
		d := g.desc
		commits := fmtPerSec(m.d.tr.groupCommit[m.group], m.d.tr.outKnown)
		info := []string{
			orUnknown(d.State),
			plural(len(d.Members), "member"),
			"lag " + fmtCount(d.TotalLag),
			"commits " + commits,
		}
		more := "protocol " + protocolOf(g) + " · coordinator " + strconv.Itoa(int(d.Coordinator))
		if d.ProtocolType != "" {
			more = "type " + d.ProtocolType + " · " + more
		}
		lines = append(lines,
			sectionTitle(th, "Group "+m.group, strings.Join(info, " · "), m.w),
			th.dim.Render(fit(" "+more, m.w)),
			sectionTitle(th, "Members", "", m.w),
			m.members.view(),
			sectionTitle(th, "Offsets", "enter shows the records from the committed offset · tab switches pane", m.w),
			m.offsets.view(),
		)
	}
	return block(strings.Join(lines, "\n"), m.w, m.h)
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}
