package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/moonmq/moonmq/internal/when"
	"github.com/moonmq/moonmq/net/client"
)

// recordsCap bounds the records kept in memory. Following live, the oldest
// are dropped; after a jump, reading stops when the buffer is full, so the
// records the user jumped to stay on screen.
const recordsCap = 2000

// tailBack is how many of the newest records per partition a live tail
// starts with, so the view is not empty on a quiet topic.
const tailBack = 50

// Messages between the records view and the root, which owns the consumer
// goroutine.
type (
	// recordsMsg delivers records read by tail id; done says the
	// consumer stopped (err nil: it was cancelled).
	recordsMsg struct {
		id   int
		recs []client.Record
		done bool
		err  error
	}
	// tailRequest asks the root to (re)start reading.
	tailRequest struct {
		topic     string
		partition int32
		from      client.Position
		follow    bool
	}
	// jumpMsg is the text entered at the jump prompt.
	jumpMsg struct{ text string }
)

// recordsModel tails a topic or one partition, or reads from a chosen
// offset or time, and shows one record in detail.
type recordsModel struct {
	d         *shared
	w, h      int
	topic     string // "" until a topic is chosen
	partition int32  // -1: every partition
	from      client.Position
	live      bool // a tail of new records (f), not a read from a chosen position (o)
	follow    bool // auto-scroll: the cursor is pinned to the newest record
	tailID    int
	running   bool   // the consumer is reading
	stopped   string // why reading stopped, when it did
	err       error
	recs      []client.Record // ordered by (timestamp, partition, offset)
	received  int64
	dropped   int64
	filter    string
	tbl       table
	detail    *client.Record
	vp        viewport.Model
}

func newRecords(d *shared) *recordsModel {
	m := &recordsModel{d: d, partition: -1}
	m.tbl = newTable(d.th, []column{
		{title: "P", min: 3, right: true},
		{title: "OFFSET", min: 9, right: true},
		{title: "TIMESTAMP", min: 18},
		{title: "KEY", min: 10, flex: 1},
		{title: "VALUE", min: 20, flex: 4},
	})
	m.vp = viewport.New()
	m.vp.SoftWrap = true
	m.rebuild()
	return m
}

func (m *recordsModel) crumb() string {
	if m.topic == "" {
		return "records"
	}
	return "records " + m.target()
}

func (m *recordsModel) target() string {
	if m.partition < 0 {
		return m.topic
	}
	return m.topic + "/" + strconv.Itoa(int(m.partition))
}

func (m *recordsModel) setSize(w, h int) {
	m.w, m.h = w, h
	m.tbl.setSize(w, max(h-1, 0))
	m.vp.SetWidth(w)
	m.vp.SetHeight(max(h-1, 0))
	if m.detail != nil {
		m.vp.SetContent(m.renderDetail(*m.detail))
	}
}

func (m *recordsModel) footer() []key.Binding {
	k := m.d.keys
	if m.detail != nil {
		return []key.Binding{k.Up, k.Down, k.Back, k.Help, k.Quit}
	}
	return []key.Binding{k.Open, k.Jump, k.Follow, k.Filter, k.Back, k.Help, k.Quit}
}

// reset starts a new read: the root calls it when it starts tail id.
func (m *recordsModel) reset(topic string, partition int32, from client.Position, follow bool, id int) {
	m.topic, m.partition, m.from, m.tailID = topic, partition, from, id
	m.live, m.follow = follow, follow
	m.running, m.stopped, m.err = true, "", nil
	m.recs, m.received, m.dropped = nil, 0, 0
	m.detail = nil
	m.tbl.cursor, m.tbl.offset = 0, 0
	m.rebuild()
}

func (m *recordsModel) back() bool {
	switch {
	case m.detail != nil:
		m.detail = nil
		return true
	case m.filter != "":
		m.setFilter("")
		return true
	}
	return false
}

func (m *recordsModel) filterText() string { return m.filter }

func (m *recordsModel) setFilter(f string) {
	m.filter = f
	m.rebuild()
}

func (m *recordsModel) dataChanged() {}

func (m *recordsModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case recordsMsg:
		if msg.id != m.tailID {
			return nil
		}
		m.add(msg.recs)
		if msg.done {
			m.running = false
			if msg.err != nil {
				m.err = msg.err
				m.stopped = "stopped: " + explain(msg.err)
			} else if m.stopped == "" {
				m.stopped = "stopped"
			}
			m.rebuild()
		}
	case jumpMsg:
		from, err := parseJump(msg.text, m.d.now)
		if err != nil {
			m.stopped = err.Error()
			return nil
		}
		return m.d.act.startTail(tailRequest{topic: m.topic, partition: m.partition, from: from, follow: false})
	case scrollMsg:
		if m.detail != nil {
			if msg.lines < 0 {
				m.vp.ScrollUp(-msg.lines)
			} else {
				m.vp.ScrollDown(msg.lines)
			}
			return nil
		}
		m.tbl.move(msg.lines)
		m.follow = m.follow && m.tbl.atBottom()
	case tea.KeyPressMsg:
		return m.handleKey(msg)
	}
	return nil
}

func (m *recordsModel) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.d.keys
	if m.detail != nil {
		var cmd tea.Cmd
		m.vp, cmd = m.vp.Update(msg)
		return cmd
	}
	if m.topic == "" {
		return nil
	}
	switch {
	case key.Matches(msg, k.Follow):
		return m.d.act.startTail(tailRequest{topic: m.topic, partition: m.partition, from: client.FromEnd(tailBack), follow: true})
	case key.Matches(msg, k.Jump):
		return m.d.act.openPrompt(promptJump)
	case key.Matches(msg, k.Open):
		if i, ok := m.selectedIndex(); ok {
			r := m.recs[i]
			m.detail = &r
			m.vp.SetContent(m.renderDetail(r))
			m.vp.GotoTop()
		}
		return nil
	case key.Matches(msg, k.Bottom):
		m.tbl.bottom()
		m.follow = m.live // End re-pins a live tail
		return nil
	}
	if m.tbl.handleNav(msg, k) {
		// Moving off the newest record pauses auto-scroll, so the
		// record being read does not scroll away.
		m.follow = m.follow && m.tbl.atBottom()
	}
	return nil
}

// selectedIndex maps the table cursor back to the buffer.
func (m *recordsModel) selectedIndex() (int, bool) {
	r, ok := m.tbl.selected()
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(r.key)
	if err != nil || i < 0 || i >= len(m.recs) {
		return 0, false
	}
	return i, true
}

// add merges a batch into the buffer in (timestamp, partition, offset)
// order, trims it to recordsCap, and keeps the cursor on its record (or
// on the newest one while following).
func (m *recordsModel) add(recs []client.Record) {
	var selected *client.Record
	if i, ok := m.selectedIndex(); ok {
		r := m.recs[i]
		selected = &r
	}
	atEnd := m.tbl.atBottom()
	for _, r := range recs {
		if m.partition >= 0 && r.Partition != m.partition {
			continue
		}
		m.received++
		i := len(m.recs)
		for i > 0 && recordLess(r, m.recs[i-1]) {
			i--
		}
		m.recs = append(m.recs, client.Record{})
		copy(m.recs[i+1:], m.recs[i:])
		m.recs[i] = r
	}
	if over := len(m.recs) - recordsCap; over > 0 {
		if m.live {
			m.dropped += int64(over)
			m.recs = append(m.recs[:0], m.recs[over:]...)
		} else {
			// After a jump, keep what was jumped to and stop reading.
			m.recs = m.recs[:recordsCap]
			if m.running {
				m.stopped = fmt.Sprintf("stopped after %d records (f follows live, o jumps)", recordsCap)
				m.d.act.stopTail(m.tailID)
			}
		}
	}
	m.rebuild()
	switch {
	case m.follow && (atEnd || selected == nil):
		m.tbl.bottom()
	case selected != nil:
		m.selectRecord(*selected)
	}
}

func (m *recordsModel) selectRecord(r client.Record) {
	for i, row := range m.tbl.rows {
		j, _ := strconv.Atoi(row.key)
		if j < len(m.recs) && m.recs[j].Partition == r.Partition && m.recs[j].Offset == r.Offset {
			m.tbl.cursor = i
			m.tbl.clamp()
			return
		}
	}
}

func recordLess(a, b client.Record) bool {
	if !a.Timestamp.Equal(b.Timestamp) {
		return a.Timestamp.Before(b.Timestamp)
	}
	if a.Partition != b.Partition {
		return a.Partition < b.Partition
	}
	return a.Offset < b.Offset
}

// rebuild turns the buffer into table rows. Row keys are buffer indexes;
// the cursor is repositioned by the caller when the buffer shifted.
func (m *recordsModel) rebuild() {
	rows := make([]tableRow, 0, len(m.recs))
	for i, r := range m.recs {
		k, v := oneLine(r.Key), oneLine(r.Value)
		if r.Key == nil {
			k = null
		}
		if !matchFilter(m.filter, k, v) {
			continue
		}
		rows = append(rows, tableRow{key: strconv.Itoa(i), cells: []string{
			strconv.Itoa(int(r.Partition)), strconv.FormatInt(r.Offset, 10),
			r.Timestamp.Local().Format("01-02 15:04:05.000"), k, v,
		}})
	}
	cursor := m.tbl.cursor
	m.tbl.rows = rows
	m.tbl.cursor = cursor
	m.tbl.clamp()
	switch {
	case m.topic == "":
		m.tbl.empty = "no topic chosen: press t on a topic, or type :records TOPIC [PARTITION]"
	case m.filter != "":
		m.tbl.empty = fmt.Sprintf("no record matches %q (esc clears the filter)", m.filter)
	case m.running:
		m.tbl.empty = "waiting for records …"
	default:
		m.tbl.empty = "no records"
	}
}

func (m *recordsModel) view() string {
	th := m.d.th
	if m.detail != nil {
		r := m.detail
		title := sectionTitle(th, fmt.Sprintf("Record %s/%d @ %d", r.Topic, r.Partition, r.Offset),
			fmt.Sprintf("%.0f%% · esc returns to the list", m.vp.ScrollPercent()*100), m.w)
		return block(title+"\n"+m.vp.View(), m.w, m.h)
	}
	var info []string
	if m.topic != "" {
		switch {
		case m.running && m.live && m.follow:
			info = append(info, th.ok.Render("following live"))
		case m.running && m.live:
			info = append(info, "live, scrolled back (G follows)")
		case m.running:
			info = append(info, "reading from "+m.from.String())
		case !m.live:
			info = append(info, "from "+m.from.String())
		}
		info = append(info, fmtCount(m.received)+" received")
		if m.dropped > 0 {
			info = append(info, fmtCount(m.dropped)+" dropped (oldest)")
		}
		if m.filter != "" {
			info = append(info, fmt.Sprintf("%d match %q", len(m.tbl.rows), m.filter))
		}
		if m.stopped != "" {
			style := th.warn
			if m.err != nil {
				style = th.err
			}
			info = append(info, style.Render(m.stopped))
		}
	}
	title := "Records"
	if m.topic != "" {
		title += " " + m.target()
	}
	return block(sectionTitle(th, title, strings.Join(info, " · "), m.w)+"\n"+m.tbl.view(), m.w, m.h)
}

// renderDetail lays out one record: where it is, when it was written, key,
// headers and value (indented JSON, text or a hex dump).
func (m *recordsModel) renderDetail(r client.Record) string {
	th := m.d.th
	var sb strings.Builder
	label := func(s string) string { return th.label.Render(fmt.Sprintf("%-10s", s)) }
	fmt.Fprintf(&sb, "%s %s / partition %d / offset %d\n", label("record"), r.Topic, r.Partition, r.Offset)
	if r.Timestamp.IsZero() {
		fmt.Fprintf(&sb, "%s %s\n", label("timestamp"), unknown)
	} else {
		fmt.Fprintf(&sb, "%s %s (%d ms, %s UTC)\n", label("timestamp"), fmtTime(r.Timestamp),
			r.Timestamp.UnixMilli(), r.Timestamp.UTC().Format(time.RFC3339Nano))
	}
	k, kf := prettyValue(r.Key)
	if strings.Contains(k, "\n") {
		fmt.Fprintf(&sb, "%s (%s, %d B)\n%s\n", label("key"), kf, len(r.Key), k)
	} else {
		fmt.Fprintf(&sb, "%s %s  %s\n", label("key"), k, th.dim.Render(fmt.Sprintf("(%s, %d B)", kf, len(r.Key))))
	}
	fmt.Fprintf(&sb, "%s %d\n", label("headers"), len(r.Headers))
	for _, h := range r.Headers {
		fmt.Fprintf(&sb, "  %s = %s\n", oneLine([]byte(h.Key)), oneLine(h.Value))
	}
	v, vf := prettyValue(r.Value)
	fmt.Fprintf(&sb, "%s %s\n", label("value"), th.dim.Render(fmt.Sprintf("(%s, %d B)", vf, len(r.Value))))
	sb.WriteString(v)
	return sb.String()
}

// parseJump reads the jump prompt: an offset, -N (N before the end),
// earliest/latest, or a point in time in the forms MQL's TIMESTAMP
// literals take (internal/when: RFC 3339, a date, a duration ago such as
// 5m or 1h30m, @unix-millis), counted back from now.
func parseJump(s string, now time.Time) (client.Position, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return client.Position{}, fmt.Errorf("jump: empty position (try 0, -100, 5m, 2026-05-01T12:00:00Z)")
	}
	// Offsets and the named ends first: "-10" is ten records before the
	// end, not ten of anything ago (a duration needs a unit).
	if _, err := strconv.ParseInt(s, 10, 64); err == nil || isEndName(s) {
		p, err := client.ParsePosition(s)
		if err != nil {
			return client.Position{}, fmt.Errorf("jump: %s", strings.TrimPrefix(err.Error(), client.ErrInvalidArgument.Error()+": "))
		}
		return p, nil
	}
	t, err := when.Parse(s, now)
	if err != nil {
		return client.Position{}, fmt.Errorf("jump: %q: %s, or an offset, -N from the end, earliest or latest", s, when.Reason(err))
	}
	return client.Timestamp(t), nil
}

// isEndName reports whether s names a log end client.ParsePosition knows.
func isEndName(s string) bool {
	switch strings.ToLower(s) {
	case "earliest", "oldest", "beginning", "start", "latest", "newest", "end":
		return true
	}
	return false
}
