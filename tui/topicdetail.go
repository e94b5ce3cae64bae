package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

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
// start, high watermark, last stable offset, size, rate), for a compacted
// topic the log cleaner's state of each partition, and configs.
type topicDetailModel struct {
	d       *shared
	w, h    int
	topic   string
	detail  *topicDetail // nil until the first answer
	err     error        // last fetch error, shown above stale data
	parts   table
	compact table // shown for a compacted topic only
	configs table
	focus   int // paneParts, paneCompact or paneConfigs
}

// The panes of the topic detail, in tab order.
const (
	paneParts = iota
	paneCompact
	paneConfigs
	numPanes
)

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
	m.compact = newTable(d.th, []column{
		{title: "P", min: 3, right: true},
		{title: "DIRTY", min: 6, right: true},
		{title: "TO CLEAN", min: 10, right: true},
		{title: "OVERDUE", min: 8, right: true},
		{title: "CLEANINGS", min: 9, right: true},
		{title: "LAST CLEANED", min: 12, right: true},
		{title: "TOOK", min: 8, right: true},
		{title: "STATUS", min: 8, flex: 1},
	})
	m.compact.focused = false
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
		m.topic, m.detail, m.err, m.focus = topic, nil, nil, paneParts
		m.parts.cursor, m.compact.cursor, m.configs.cursor = 0, 0, 0
		m.parts.setRows(nil)
		m.compact.setRows(nil)
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

// compacted reports whether the topic shown is compacted, and so has a
// compaction pane.
func (m *topicDetailModel) compacted() bool { return m.detail != nil && m.detail.desc.Compacted() }

func (m *topicDetailModel) layout() {
	if !m.compacted() {
		avail := max(m.h-2, 2) // two section titles
		ph := min(len(m.parts.rows)+1, avail*3/5)
		ph = max(ph, min(2, avail))
		m.parts.setSize(m.w, ph)
		m.compact.setSize(m.w, 0)
		m.configs.setSize(m.w, avail-ph)
		return
	}
	// Three section titles; partitions and compaction (a row per
	// partition each) share up to four fifths, configs get the rest.
	avail := max(m.h-3, 3)
	ph := max(min(len(m.parts.rows)+1, avail*2/5), min(2, avail))
	ch := max(min(len(m.compact.rows)+1, avail*2/5), min(2, avail-ph))
	m.parts.setSize(m.w, ph)
	m.compact.setSize(m.w, ch)
	m.configs.setSize(m.w, max(avail-ph-ch, 0))
}

func (m *topicDetailModel) setFocus(f int) {
	if f == paneCompact && !m.compacted() {
		f = paneParts
	}
	m.focus = f
	m.parts.focused = f == paneParts
	m.compact.focused = f == paneCompact
	m.configs.focused = f == paneConfigs
}

// cycleFocus moves to the next pane shown (the previous one when back).
func (m *topicDetailModel) cycleFocus(back bool) {
	step := 1
	if back {
		step = numPanes - 1
	}
	f := (m.focus + step) % numPanes
	if f == paneCompact && !m.compacted() {
		f = (f + step) % numPanes
	}
	m.setFocus(f)
}

func (m *topicDetailModel) footer() []key.Binding {
	k := m.d.keys
	return []key.Binding{k.Open, k.Tail, k.Focus, k.Back, k.Help, k.Quit}
}

func (m *topicDetailModel) back() bool { return false }

func (m *topicDetailModel) active() *table {
	switch m.focus {
	case paneCompact:
		return &m.compact
	case paneConfigs:
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
			m.cycleFocus(msg.String() == "shift+tab")
			return nil
		}
		if m.active().handleNav(msg, m.d.keys) {
			return nil
		}
		switch {
		case key.Matches(msg, m.d.keys.Tail):
			return m.d.act.navigate(navMsg{to: vRecords, topic: m.topic, partition: -1})
		case key.Matches(msg, m.d.keys.Open) && m.focus != paneConfigs:
			// A partition's row, in either pane, tails that partition.
			if r, ok := m.active().selected(); ok {
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
	m.compact.setRows(m.compactionRows(desc))
	if m.focus == paneCompact && !m.compacted() {
		m.setFocus(paneParts) // the topic is no longer compacted
	}

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

// compactionRows are the compaction pane's rows: per partition what the
// leader's log cleaner reports, unknown where it reports nothing (Kafka,
// or a partition it has not looked at yet).
func (m *topicDetailModel) compactionRows(desc client.TopicDescription) []tableRow {
	if !desc.Compacted() {
		return nil
	}
	rows := make([]tableRow, 0, len(desc.Partitions))
	for _, p := range desc.Partitions {
		cells := []string{strconv.Itoa(int(p.Partition)), unknown, unknown, unknown, unknown, unknown, unknown, ""}
		if c := p.Compaction; c != nil {
			last, took := null, null
			if !c.LastCleaned.IsZero() {
				last, took = fmtAge(m.d.now.Sub(c.LastCleaned)), c.LastDuration.Round(time.Millisecond).String()
			}
			status := ""
			switch {
			case c.Uncleanable != "":
				// The broker's text, escaped (nothing it sends reaches
				// the terminal as a control sequence) and on one line.
				status = "uncleanable: " + strings.Join(strings.Fields(safeText(c.Uncleanable)), " ")
			case c.Cleaning:
				status = "cleaning"
			}
			cells = []string{strconv.Itoa(int(p.Partition)), fmtPercent(c.DirtyRatio), fmtBytes(c.DirtyBytes),
				c.CompactionDelay.Round(time.Second).String(), strconv.FormatInt(c.Cleanings, 10), last, took, status}
		}
		rows = append(rows, tableRow{key: strconv.Itoa(int(p.Partition)), dim: p.Compaction == nil, cells: cells})
	}
	return rows
}

// compactionInfo is the compaction pane's title line: the policy and the
// ratio a partition is cleaned at, or why there is nothing below it.
func (m *topicDetailModel) compactionInfo() string {
	desc := m.detail.desc
	info := []string{"cleanup.policy " + desc.CleanupPolicy()}
	if c, ok := desc.Config("min.cleanable.dirty.ratio"); ok {
		if r, err := strconv.ParseFloat(c.Value, 64); err == nil {
			info = append(info, "cleaned once dirty > "+fmtPercent(r))
		}
	}
	reported := false
	for _, p := range desc.Partitions {
		reported = reported || p.Compaction != nil
	}
	if !reported {
		info = append(info, "the broker reports no cleaner state")
	}
	return strings.Join(info, " · ")
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
	if m.compacted() {
		lines = append(lines, sectionTitle(th, "Compaction", m.compactionInfo(), m.w), m.compact.view())
	}
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
