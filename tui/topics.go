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

// Topics table columns, in display order.
const (
	tcName = iota
	tcParts
	tcRF
	tcRecords
	tcSize
	tcIn
	tcOut
	tcBytesIn
	tcCompact
	numTopicCols
)

// topicsModel is the sortable, filterable table of every topic.
type topicsModel struct {
	d      *shared
	w, h   int
	tbl    table
	sort   sortSpec
	filter string
	shown  int // rows after filtering
	total  int
	// compacted counts the compacted topics of the snapshot, internal
	// ones included (__consumer_offsets is compacted).
	compacted int
}

func newTopics(d *shared) *topicsModel {
	m := &topicsModel{d: d}
	m.tbl = newTable(d.th, []column{
		tcName:    {title: "NAME", min: 16, flex: 1},
		tcParts:   {title: "PART", min: 5, right: true},
		tcRF:      {title: "RF", min: 3, right: true},
		tcRecords: {title: "RECORDS", min: 8, right: true},
		tcSize:    {title: "SIZE", min: 10, right: true},
		tcIn:      {title: "IN/s", min: 6, right: true},
		tcOut:     {title: "OUT/s", min: 6, right: true},
		tcBytesIn: {title: "BYTES/s", min: 12, right: true},
		tcCompact: {title: "COMPACT", min: 8, right: true},
	})
	m.tbl.empty = "no topics"
	m.tbl.sortCol = tcName
	return m
}

func (m *topicsModel) crumb() string { return "topics" }

func (m *topicsModel) setSize(w, h int) {
	m.w, m.h = w, h
	m.tbl.setSize(w, max(h-1, 0))
}

func (m *topicsModel) footer() []key.Binding {
	k := m.d.keys
	return []key.Binding{k.Open, k.Tail, k.Filter, k.Sort, k.Back, k.Help, k.Quit}
}

func (m *topicsModel) back() bool {
	if m.filter != "" {
		m.setFilter("")
		return true
	}
	return false
}

func (m *topicsModel) filterText() string { return m.filter }

func (m *topicsModel) setFilter(f string) {
	m.filter = f
	m.dataChanged()
}

func (m *topicsModel) nextSort() {
	m.sort.cycle(numTopicCols, func(c int) bool { return c != tcName })
	m.dataChanged()
}

func (m *topicsModel) reverseSort() {
	m.sort.desc = !m.sort.desc
	m.dataChanged()
}

func (m *topicsModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case scrollMsg:
		m.tbl.move(msg.lines)
	case tea.KeyPressMsg:
		if m.tbl.handleNav(msg, m.d.keys) {
			return nil
		}
		r, ok := m.tbl.selected()
		switch {
		case !ok:
		case key.Matches(msg, m.d.keys.Open):
			return m.d.act.navigate(navMsg{to: vTopic, topic: r.key})
		case key.Matches(msg, m.d.keys.Tail):
			return m.d.act.navigate(navMsg{to: vRecords, topic: r.key, partition: -1})
		}
	}
	return nil
}

// topicRow is one topic with its rates, the unit of sorting.
type topicRow struct {
	client.TopicInfo
	in, out, bytes   float64
	inOK, outOK, bOK bool
}

func (m *topicsModel) dataChanged() {
	s, tr := m.d.snap, m.d.tr
	if s == nil {
		return
	}
	rows := make([]topicRow, 0, len(s.topics))
	for _, t := range s.topics {
		if !matchFilter(m.filter, t.Name) {
			continue
		}
		r := topicRow{TopicInfo: t}
		r.in, r.inOK = tr.in(t.Name)
		r.out, r.outOK = tr.out(t.Name)
		r.bytes, r.bOK = tr.inBytes(t.Name)
		rows = append(rows, r)
	}
	m.shown, m.total, m.compacted = len(rows), len(s.topics), 0
	for _, t := range s.topics {
		if t.Compacted() {
			m.compacted++
		}
	}
	rate := func(v float64, ok bool) float64 {
		if !ok {
			return -1
		}
		return v
	}
	sortRows(rows, m.sort.desc, func(a, b topicRow) int {
		switch m.sort.col {
		case tcParts:
			return cmp.Compare(a.Partitions, b.Partitions)
		case tcRF:
			return cmp.Compare(a.Replicas, b.Replicas)
		case tcRecords:
			return cmp.Compare(a.Records, b.Records)
		case tcSize:
			return cmp.Compare(a.Bytes, b.Bytes)
		case tcIn:
			return cmpFloat(rate(a.in, a.inOK), rate(b.in, b.inOK))
		case tcOut:
			return cmpFloat(rate(a.out, a.outOK), rate(b.out, b.outOK))
		case tcBytesIn:
			return cmpFloat(rate(a.bytes, a.bOK), rate(b.bytes, b.bOK))
		case tcCompact:
			return cmpFloat(compactRank(a.TopicInfo), compactRank(b.TopicInfo))
		}
		return strings.Compare(a.Name, b.Name)
	}, func(r topicRow) string { return r.Name })
	trs := make([]tableRow, len(rows))
	for i, r := range rows {
		trs[i] = tableRow{key: r.Name, dim: r.Internal, cells: []string{
			tcName:    r.Name,
			tcParts:   strconv.Itoa(r.Partitions),
			tcRF:      strconv.Itoa(r.Replicas),
			tcRecords: fmtCount(r.Records),
			tcSize:    fmtBytes(r.Bytes),
			tcIn:      fmtRate(r.in, r.inOK),
			tcOut:     fmtRate(r.out, r.outOK),
			tcBytesIn: fmtByteRate(r.bytes, r.bOK),
			tcCompact: fmtCompact(r.TopicInfo),
		}}
	}
	m.tbl.sortCol, m.tbl.sortDesc = m.sort.col, m.sort.desc
	m.tbl.empty = "no topics"
	if m.filter != "" {
		m.tbl.empty = fmt.Sprintf("no topic matches %q (esc clears the filter)", m.filter)
	}
	m.tbl.setRows(trs)
}

func (m *topicsModel) view() string {
	th := m.d.th
	if m.d.snap == nil {
		return block(th.dim.Render(" waiting for the first answer from the broker …"), m.w, m.h)
	}
	info := fmt.Sprintf("%d", m.total)
	if m.filter != "" {
		info = fmt.Sprintf("%d of %d, filter %q", m.shown, m.total, m.filter)
	}
	if m.compacted > 0 {
		info += fmt.Sprintf(" · %d compacted", m.compacted)
	}
	if si := m.tbl.scrollInfo(); si != "" {
		info += " · rows " + si
	}
	return block(sectionTitle(th, "Topics", info, m.w)+"\n"+m.tbl.view(), m.w, m.h)
}

// fmtCompact is a topic's COMPACT cell: empty for a topic that is not
// compacted, the largest dirty ratio of its partitions as a percentage
// for a compacted one, "yes" when the broker does not report it (Kafka
// keeps it in broker metrics, off the wire) or its cleaner has not looked
// yet, unknown when the policy could not be read.
func fmtCompact(t client.TopicInfo) string {
	switch {
	case t.CleanupPolicy == "":
		return unknown
	case !t.Compacted():
		return ""
	case t.DirtyRatio < 0:
		return "yes"
	default:
		return fmtPercent(t.DirtyRatio)
	}
}

// compactRank orders the COMPACT column: unknown policy, not compacted,
// compacted without a ratio, then by dirty ratio.
func compactRank(t client.TopicInfo) float64 {
	switch {
	case t.CleanupPolicy == "":
		return -3
	case !t.Compacted():
		return -2
	case t.DirtyRatio < 0:
		return -1
	default:
		return t.DirtyRatio
	}
}
