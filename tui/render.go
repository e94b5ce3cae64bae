package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// View renders the whole screen. Every line is exactly the terminal width
// and there are exactly as many lines as the terminal is high, so each frame
// fully replaces the previous one.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.MouseMode = tea.MouseModeCellMotion
	v.WindowTitle = "moonmq top · " + m.opts.Addr
	return v
}

func (m *Model) render() string {
	if m.w == 0 || m.h == 0 {
		return "" // before the first WindowSizeMsg
	}
	if m.w < minWidth || m.h < minHeight {
		return block(fmt.Sprintf("window too small: need %dx%d", minWidth, minHeight), m.w, m.h)
	}
	bodyH := m.h - chrome
	body := m.panes[m.active].view()
	if m.showHelp {
		body = m.overlay(body, m.helpBox(), m.w, bodyH)
	}
	return strings.Join([]string{
		m.headerLine(),
		m.tabLine(),
		block(body, m.w, bodyH),
		m.statusLine(),
		m.footerLine(),
	}, "\n")
}

func (m *Model) headerLine() string {
	th := m.d.th
	// Least important last: on a narrow terminal the cluster ID is what
	// the ellipsis eats.
	parts := []string{th.title.Render("moonmq top"), m.opts.Addr}
	if m.opts.Principal != "" {
		// Whom the broker sees: what ACLs and quotas apply to.
		parts = append(parts, th.label.Render("as ")+m.opts.Principal)
	}
	if s := m.d.snap; s != nil {
		parts = append(parts, th.label.Render("brokers ")+strconv.Itoa(len(s.cluster.Brokers)))
	}
	parts = append(parts, th.label.Render("every ")+m.opts.Refresh.String())
	if s := m.d.snap; s != nil && s.cluster.ID != "" {
		parts = append(parts, th.label.Render("cluster ")+s.cluster.ID)
	}
	return fit(" "+strings.Join(parts, "  "), m.w)
}

// tabLine shows the top-level views with their keys, the active one
// highlighted, and the current view's breadcrumb when it is a detail view.
func (m *Model) tabLine() string {
	th := m.d.th
	tabs := []struct {
		key   string
		name  string
		views []viewID
	}{
		{"1", "Overview", []viewID{vOverview}},
		{"2", "Topics", []viewID{vTopics, vTopic}},
		{"3", "Groups", []viewID{vGroups, vGroup}},
		{"4", "Records", []viewID{vRecords}},
	}
	var sb strings.Builder
	sb.WriteByte(' ')
	for _, t := range tabs {
		label := " " + t.key + " " + t.name + " "
		active := false
		for _, v := range t.views {
			active = active || v == m.active
		}
		if active {
			sb.WriteString(th.tabActive.Render(label))
		} else {
			sb.WriteString(th.tab.Render(label))
		}
		sb.WriteByte(' ')
	}
	if crumb := m.panes[m.active].crumb(); m.active == vTopic || m.active == vGroup || m.active == vRecords {
		sb.WriteString(th.dim.Render(" › ") + crumb)
	}
	return fit(sb.String(), m.w)
}

// statusLine is the prompt while one is open, otherwise the connection
// state: reconnecting, waiting on a slow broker, a notice, or when the data
// was last refreshed.
func (m *Model) statusLine() string {
	th := m.d.th
	if m.prompt != promptNone {
		return fit(" "+m.input.View(), m.w)
	}
	now := m.d.now
	var s string
	switch {
	case m.src == nil && m.lastErr == nil:
		s = th.warn.Render("connecting to " + m.opts.Addr + " …")
	case m.lastErr != nil:
		// What is happening first; the cause may be long and is what
		// the ellipsis eats on a narrow terminal.
		s = th.warn.Render("reconnecting to " + m.opts.Addr + " …")
		if !m.lastOK.IsZero() {
			s += th.dim.Render(" data from " + fmtAge(now.Sub(m.lastOK)) + " ·")
		}
		s += " " + explain(m.lastErr)
	case m.refreshing && now.Sub(m.refreshStart) > max(2*m.opts.Refresh, 2*time.Second):
		s = th.warn.Render(fmt.Sprintf("waiting for %s … %s", m.opts.Addr, now.Sub(m.refreshStart).Round(time.Second)))
	case m.notice != "":
		if m.noticeErr {
			s = th.err.Render(m.notice)
		} else {
			s = m.notice
		}
	case !m.lastOK.IsZero():
		s = th.dim.Render(fmt.Sprintf("updated %s in %s", m.lastOK.Local().Format("15:04:05"),
			m.lastTook.Round(time.Millisecond)))
	}
	return fit(" "+s, m.w)
}

func (m *Model) footerLine() string {
	return fit(" "+m.help.ShortHelpView(m.panes[m.active].footer()), m.w)
}

// helpBox renders the help overlay: one column per key group.
func (m *Model) helpBox() string {
	th := m.d.th
	var cols []string
	for _, g := range m.d.keys.helpGroups() {
		lines := []string{th.section.Render(g.title)}
		for _, b := range g.bindings {
			h := b.Help()
			lines = append(lines, th.key.Render(fmt.Sprintf("%-6s", h.Key))+" "+h.Desc)
		}
		cols = append(cols, strings.Join(lines, "\n"))
	}
	content := lipgloss.JoinHorizontal(lipgloss.Top, joinWithGap(cols, "  ")...)
	content += "\n\n" + th.dim.Render(":topic NAME  :group NAME  :records TOPIC [PARTITION]") +
		"\n" + th.dim.Render("? or esc closes this help")
	return th.box.Render(content)
}

func joinWithGap(cols []string, gap string) []string {
	out := make([]string, 0, 2*len(cols))
	for i, c := range cols {
		if i > 0 {
			out = append(out, gap)
		}
		out = append(out, c)
	}
	return out
}

// overlay draws box centred over base (w x h cells) using lipgloss's
// compositor, so the view underneath stays visible around it.
func (m *Model) overlay(base, box string, w, h int) string {
	base = block(base, w, h)
	bw, bh := lipgloss.Width(box), lipgloss.Height(box)
	if bw > w || bh > h {
		return block(box, w, h) // too small to float: show the help alone
	}
	comp := lipgloss.NewCompositor(
		lipgloss.NewLayer(base),
		lipgloss.NewLayer(box).X((w-bw)/2).Y((h-bh)/2).Z(1),
	)
	return lipgloss.NewCanvas(w, h).Compose(comp).Render()
}
