package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/moonmq/moonmq/net/client"
)

// topicDetailMsg carries the answer to a topic-detail fetch.
type topicDetailMsg struct {
	topic  string
	detail topicDetail
	err    error
}

// topicDetailModel shows one topic: partitions (leader, replicas, ISR,
// state — online, offline, damaged with its number of damaged ranges — log
// start, high watermark, last stable offset, size, rate) and configs.
type topicDetailModel struct {
	d       *shared
	w, h    int
	topic   string
	detail  *topicDetail // nil until the first answer
	err     error        // last fetch error, shown above stale data
	parts   table
	configs table
	focus   int // 0 partitions, 1 configs
}

func newTopicDetail(d *shared) *topicDetailModel {
	m := &topicDetailModel{d: d}
	m.parts = newTable(d.th, []column{
		{title: "P", min: 3, right: true},
		{title: "LEADER", min: 6, right: true},
		{title: "REPLICAS", min: 8, flex: 1},
		{title: "ISR", min: 8, flex: 1},
		{title: "STATE", min: 11},
		{title: "START", min: 9, right: true},
		{title: "HW", min: 9, right: true},
		{title: "LSO", min: 9, right: true},
		{title: "SIZE", min: 9, right: true},
		{title: "IN/s", min: 7, right: true},
	})
	m.parts.empty = "loading …"
	m.configs = newTable(d.th, []column{
		{title: "CONFIG", min: 24, flex: 2},
		{title: "VALUE", min: 16, flex: 3},
		{title: "SOURCE", min: 13},
	})
	m.configs.focused = false
	m.configs.empty = "no configs reported"
	return m
}

// open switches the view to a topic, dropping the previous topic's data.
func (m *topicDetailModel) open(topic string) {
	if topic != m.topic {
		m.topic, m.detail, m.err, m.focus = topic, nil, nil, 0
		m.parts.cursor, m.configs.cursor = 0, 0
		m.parts.setRows(nil)
		m.configs.setRows(nil)
		m.parts.empty = "loading …"
	}
	m.setFocus(m.focus)
}

func (m *topicDetailModel) crumb() string { return "topic " + m.topic }

func (m *topicDetailModel) setSize(w, h int) {
	m.w, m.h = w, h
	m.layout()
}

func (m *topicDetailModel) layout() {
	avail := max(m.h-2, 2) // two section titles
	ph := min(len(m.parts.rows)+1, avail*3/5)
	ph = max(ph, min(2, avail))
	m.parts.setSize(m.w, ph)
	m.configs.setSize(m.w, avail-ph)
}

func (m *topicDetailModel) setFocus(f int) {
	m.focus = f
	m.parts.focused = f == 0
	m.configs.focused = f == 1
}

func (m *topicDetailModel) footer() []key.Binding {
	k := m.d.keys
	return []key.Binding{k.Open, k.Tail, k.Focus, k.Back, k.Help, k.Quit}
}

func (m *topicDetailModel) back() bool { return false }

func (m *topicDetailModel) active() *table {
	if m.focus == 1 {
		return &m.configs
	}
	return &m.parts
}

func (m *topicDetailModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case topicDetailMsg:
		if msg.topic != m.topic {
			return nil // a late answer for a topic we left
		}
		m.err = msg.err
		if msg.err == nil {
			m.detail = &msg.detail
		} else if m.detail == nil {
			m.parts.empty = "cannot describe topic: " + explain(msg.err)
		}
		m.dataChanged()
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
		switch {
		case key.Matches(msg, m.d.keys.Tail):
			return m.d.act.navigate(navMsg{to: vRecords, topic: m.topic, partition: -1})
		case key.Matches(msg, m.d.keys.Open) && m.focus == 0:
			if r, ok := m.parts.selected(); ok {
				p, err := strconv.ParseInt(r.key, 10, 32)
				if err == nil {
					return m.d.act.navigate(navMsg{to: vRecords, topic: m.topic, partition: int32(p)})
				}
			}
		}
	}
	return nil
}

func (m *topicDetailModel) dataChanged() {
	if m.detail == nil {
		m.layout()
		return
	}
	desc := m.detail.desc
	rows := make([]tableRow, 0, len(desc.Partitions))
	for _, p := range desc.Partitions {
		leader := strconv.Itoa(int(p.Leader))
		if p.Leader < 0 {
			leader = "none"
		}
		isr := fmtIDs(p.ISR)
		if len(p.Offline) > 0 {
			isr += " (offline " + fmtIDs(p.Offline) + ")"
		}
		lso := unknown
		if o, ok := m.detail.stable[p.Partition]; ok {
			lso = fmtOffset(o)
		}
		rate, ok := m.d.tr.partitionIn(m.topic, p.Partition)
		state := p.State
		if n := len(p.Corrupt); n > 0 && p.State != "offline" {
			state = fmt.Sprintf("damaged (%d)", n) // offsets in the ranges are not served
		}
		rows = append(rows, tableRow{
			key: strconv.Itoa(int(p.Partition)),
			dim: p.Err != nil || p.Leader < 0,
			cells: []string{
				strconv.Itoa(int(p.Partition)), leader, fmtIDs(p.Replicas), isr, state,
				fmtOffset(p.LogStart), fmtOffset(p.HighWatermark), lso, fmtBytes(p.Bytes), fmtRate(rate, ok),
			},
		})
	}
	m.parts.empty = "no partitions"
	m.parts.setRows(rows)

	// Overrides first: they are what makes this topic different.
	cfgs := append([]client.ConfigEntry(nil), desc.Configs...)
	sort.SliceStable(cfgs, func(i, j int) bool {
		if cfgs[i].Default != cfgs[j].Default {
			return !cfgs[i].Default
		}
		return cfgs[i].Name < cfgs[j].Name
	})
	crows := make([]tableRow, 0, len(cfgs))
	for _, c := range cfgs {
		v := c.Value
		if c.Sensitive {
			v = "(sensitive)"
		}
		crows = append(crows, tableRow{key: c.Name, dim: c.Default, cells: []string{c.Name, v, c.Source}})
	}
	if desc.Configs == nil {
		m.configs.empty = "the broker does not support DescribeConfigs"
	}
	m.configs.setRows(crows)
	m.layout()
}

func (m *topicDetailModel) view() string {
	th := m.d.th
	var info []string
	if m.detail != nil {
		desc := m.detail.desc
		info = append(info, plural(len(desc.Partitions), "partition"), fmtCount(desc.Records())+" records")
		if ti, ok := m.d.snap.topicOrZero(m.topic); ok && ti.Bytes >= 0 {
			info = append(info, fmtBytes(ti.Bytes))
		}
		in, inOK := m.d.tr.in(m.topic)
		out, outOK := m.d.tr.out(m.topic)
		info = append(info, "in "+fmtPerSec(in, inOK), "out "+fmtPerSec(out, outOK))
		if desc.Internal {
			info = append(info, "internal")
		}
	}
	var lines []string
	title := sectionTitle(th, "Topic "+m.topic, strings.Join(info, " · "), m.w)
	lines = append(lines, title)
	if m.err != nil && m.detail != nil {
		// Keep showing the last good data, but say it is stale.
		lines[0] = fit(th.section.Render("Topic "+m.topic)+" "+th.err.Render("stale: "+explain(m.err)), m.w)
	}
	lines = append(lines, m.parts.view())
	nonDefault := 0
	if m.detail != nil {
		for _, c := range m.detail.desc.Configs {
			if !c.Default {
				nonDefault++
			}
		}
	}
	lines = append(lines, sectionTitle(th, "Configs", fmt.Sprintf("%d set on the topic, defaults dimmed · tab switches pane", nonDefault), m.w))
	lines = append(lines, m.configs.view())
	return block(strings.Join(lines, "\n"), m.w, m.h)
}

// topicOrZero looks a topic up in a possibly nil snapshot.
func (s *snapshot) topicOrZero(name string) (client.TopicInfo, bool) {
	if s == nil {
		return client.TopicInfo{}, false
	}
	return s.topic(name)
}
