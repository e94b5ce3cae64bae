package tui

import (
	"github.com/moonmq/moonmq/net/client"

	"fmt"
	"sort"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// overviewModel shows the brokers, cluster totals, produce and consume
// throughput sparklines and the busiest topics.
type overviewModel struct {
	d       *shared
	w, h    int
	brokers table
	top     table
}

func newOverview(d *shared) *overviewModel {
	m := &overviewModel{d: d}
	m.brokers = newTable(d.th, []column{
		{title: "ID", min: 4, right: true},
		{title: "ADDRESS", min: 20, flex: 2},
		{title: "RACK", min: 6, flex: 1},
		{title: "LEADERS", min: 7, right: true},
		{title: "REPLICAS", min: 8, right: true},
		{title: "STATUS", min: 16, flex: 2},
	})
	m.brokers.focused = false
	m.brokers.empty = "no brokers reported"
	m.top = newTable(d.th, []column{
		{title: "TOPIC", min: 16, flex: 3},
		{title: "IN/s", min: 8, right: true},
		{title: "OUT/s", min: 8, right: true},
		{title: "BYTES IN/s", min: 12, right: true},
		{title: "RECORDS", min: 9, right: true},
		{title: "PART", min: 4, right: true},
	})
	m.top.empty = "no topics"
	return m
}

func (m *overviewModel) crumb() string { return "overview" }

func (m *overviewModel) setSize(w, h int) {
	m.w, m.h = w, h
	m.layout()
}

// layout sizes the two tables: brokers get up to a quarter of the body, the
// top-topics table what is left under the fixed lines.
func (m *overviewModel) layout() {
	const fixed = 11 // section titles, partition health, totals, sparklines, note and blank lines
	nb := len(m.brokers.rows)
	bh := min(max(nb, 1), max(m.h/4, 1)) + 1
	m.brokers.setSize(m.w, bh)
	m.top.setSize(m.w, max(m.h-fixed-bh, 2))
}

func (m *overviewModel) footer() []key.Binding {
	k := m.d.keys
	return []key.Binding{k.Open, k.Tail, k.Topics, k.Groups, k.Command, k.Help, k.Quit}
}

func (m *overviewModel) back() bool { return false }

func (m *overviewModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case scrollMsg:
		m.top.move(msg.lines)
	case tea.KeyPressMsg:
		if m.top.handleNav(msg, m.d.keys) {
			return nil
		}
		r, ok := m.top.selected()
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

func (m *overviewModel) dataChanged() {
	s, tr := m.d.snap, m.d.tr
	if s == nil {
		return
	}
	// Brokers: live ones from metadata, plus ones seen earlier and gone,
	// and ones never seen that host replicas (down since before the
	// dashboard started).
	ids := make([]int32, 0, len(tr.brokers))
	for id := range tr.brokers {
		ids = append(ids, id)
	}
	for _, id := range s.cluster.Down {
		if tr.brokers[id] == nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var brows []tableRow
	for _, id := range ids {
		b := tr.brokers[id]
		if b == nil {
			b = &brokerSeen{broker: client.Broker{ID: id}}
		}
		status := "up"
		switch {
		case !b.up && b.lastSeen.IsZero():
			status = "down"
		case !b.up:
			status = "down, seen " + fmtAge(m.d.now.Sub(b.lastSeen))
		}
		if id == s.cluster.Controller && b.up {
			status += ", controller"
		}
		rack := b.broker.Rack
		if rack == "" {
			rack = null
		}
		addr := null
		if b.broker.Host != "" {
			addr = fmt.Sprintf("%s:%d", b.broker.Host, b.broker.Port)
		}
		brows = append(brows, tableRow{
			key: strconv.Itoa(int(id)),
			cells: []string{strconv.Itoa(int(id)), addr, rack,
				strconv.Itoa(s.cluster.Leaders[id]), strconv.Itoa(s.cluster.Replicas[id]), status},
			dim: !b.up,
		})
	}
	m.brokers.setRows(brows)

	// Top topics: user topics by produce rate, then consume rate, then size.
	type row struct {
		name           string
		in, out, bytes float64
		inOK, outOK    bool
		bytesOK        bool
		records        int64
		parts          int
	}
	var rows []row
	for _, t := range s.topics {
		if t.Internal {
			continue
		}
		r := row{name: t.Name, records: t.Records, parts: t.Partitions}
		r.in, r.inOK = tr.in(t.Name)
		r.out, r.outOK = tr.out(t.Name)
		r.bytes, r.bytesOK = tr.inBytes(t.Name)
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.in != b.in {
			return a.in > b.in
		}
		if a.out != b.out {
			return a.out > b.out
		}
		if a.records != b.records {
			return a.records > b.records
		}
		return a.name < b.name
	})
	trs := make([]tableRow, len(rows))
	for i, r := range rows {
		trs[i] = tableRow{key: r.name, cells: []string{
			r.name, fmtRate(r.in, r.inOK), fmtRate(r.out, r.outOK), fmtByteRate(r.bytes, r.bytesOK),
			fmtCount(r.records), strconv.Itoa(r.parts),
		}}
	}
	m.top.setRows(trs)
	m.layout()
}

func (m *overviewModel) view() string {
	th, s, tr := m.d.th, m.d.snap, m.d.tr
	if s == nil {
		return block(th.dim.Render(" waiting for the first answer from the broker …"), m.w, m.h)
	}
	var lines []string
	brokers := fmt.Sprintf("%d up", len(s.cluster.Brokers))
	if down := len(m.brokers.rows) - len(s.cluster.Brokers); down > 0 {
		brokers += fmt.Sprintf(", %d down", down)
	}
	lines = append(lines, sectionTitle(th, "Brokers", brokers, m.w))
	lines = append(lines, m.brokers.view())
	// Partition health over every topic, internal ones too: an offline
	// __consumer_offsets partition stops groups.
	health := th.ok.Render("all partitions fully replicated")
	if c := s.cluster; c.UnderReplicated > 0 || c.Offline > 0 {
		var parts []string
		if c.Offline > 0 {
			parts = append(parts, th.err.Render(fmt.Sprintf("%d offline", c.Offline)))
		}
		if c.UnderReplicated > 0 {
			parts = append(parts, th.warn.Render(fmt.Sprintf("%d under-replicated", c.UnderReplicated)))
		}
		health = strings.Join(parts, "  ") + th.dim.Render(fmt.Sprintf(" of %d partitions", c.Partitions))
	}
	// Open transactions hold back the last stable offset of their
	// partitions (read-committed consumers wait); shown when the brokers
	// can list them.
	if n, ok := s.openTxns(); ok {
		txns := th.dim.Render("no open transactions")
		if n > 0 {
			txns = th.warn.Render(plural(n, "open transaction"))
		}
		health += th.dim.Render(" · ") + txns
	}
	lines = append(lines, fit(" "+health, m.w))

	// Totals over user topics; internal topics are bookkeeping.
	var topics, parts int
	var records, bytes int64
	recordsKnown, bytesKnown := true, true
	for _, t := range s.topics {
		if t.Internal {
			continue
		}
		topics++
		parts += t.Partitions
		if t.Records < 0 {
			recordsKnown = false
		} else {
			records += t.Records
		}
		if t.Bytes < 0 {
			bytesKnown = false
		} else {
			bytes += t.Bytes
		}
	}
	if !recordsKnown {
		records = -1
	}
	if !bytesKnown {
		bytes = -1
	}
	groups := unknown
	lag := unknown
	if s.groupsErr == nil {
		groups = strconv.Itoa(len(s.groups))
		var total int64
		for _, g := range s.groups {
			if g.desc != nil {
				total += g.desc.TotalLag
			}
		}
		lag = fmtCount(total)
	}
	lines = append(lines, "", fit(" "+strings.Join([]string{
		th.label.Render("topics ") + strconv.Itoa(topics),
		th.label.Render("partitions ") + strconv.Itoa(parts),
		th.label.Render("records ") + fmtCount(records),
		th.label.Render("size ") + fmtBytes(bytes),
		th.label.Render("groups ") + groups,
		th.label.Render("lag ") + lag,
	}, "  "), m.w))

	// Throughput sparklines: label, current value, graph.
	lines = append(lines, "", sectionTitle(th, "Throughput", "last "+fmtWindow(tr.window)+", every "+m.d.refresh.String(), m.w))
	const labelW, valueW = 10, 14
	gw := max(m.w-labelW-valueW-3, 0)
	gap := 3 * m.d.refresh
	spark := func(label, value string, h *series) string {
		return " " + fit(label, labelW) + fitRight(value, valueW) + "  " +
			th.spark.Render(sparkline(h, m.d.now, tr.window, gap, gw))
	}
	lines = append(lines,
		spark("produce", fmtRate(tr.totalIn, tr.inKnown)+" rec/s", &tr.inHist),
		spark("", fmtByteRate(tr.totalBytes, tr.bytesKnown), &tr.bytesHist),
		spark("consume", fmtRate(tr.totalOut, tr.outKnown)+" rec/s", &tr.outHist),
	)
	note := ""
	switch {
	case s.groupsErr != nil:
		note = "consume rate needs consumer groups: " + explain(s.groupsErr)
	case !tr.bytesKnown && tr.inKnown:
		note = "bytes/s: the broker does not report log sizes (DescribeLogDirs)"
	}
	lines = append(lines, th.dim.Render(fit(" "+note, m.w)))

	lines = append(lines, sectionTitle(th, "Top topics", "by produce rate", m.w), m.top.view())
	return block(strings.Join(lines, "\n"), m.w, m.h)
}
