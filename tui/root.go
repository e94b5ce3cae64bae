package tui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/moonmq/moonmq/net/client"
)

// Root-level messages.
type (
	tickMsg      struct{ at time.Time }
	connectedMsg struct {
		src Source
		err error
	}
	snapshotMsg struct{ snap *snapshot }
)

type promptKind int

const (
	promptNone promptKind = iota
	promptFilter
	promptCommand
	promptJump
)

// chrome is the number of lines around the body: header, tab line, status
// line, footer.
const chrome = 4

// minWidth and minHeight are the smallest terminal the layout handles; below
// it the dashboard asks for a bigger window instead of drawing garbage.
const (
	minWidth  = 40
	minHeight = 10
)

// noticeTTL is how long a one-off message stays on the status line.
const noticeTTL = 5 * time.Second

// Model is the root model: it owns the connection, the refresh tick, the
// shared data, the live tail and the prompt line, routes messages to the
// active view and lays out header, tab line, body, status line and footer.
// It is used through a pointer: Bubble Tea calls Update and View from one
// goroutine, and commands never touch it (they return messages).
type Model struct {
	opts Options
	ctx  context.Context // program lifetime; Run cancels it on exit
	conn *connHolder

	d        *shared
	panes    [numViews]pane
	overview *overviewModel
	topics   *topicsModel
	topic    *topicDetailModel
	groups   *groupsModel
	group    *groupDetailModel
	records  *recordsModel
	active   viewID
	history  []viewID
	w, h     int

	src          Source
	dialing      bool
	refreshing   bool
	refreshStart time.Time
	detailBusy   bool
	lastErr      error
	lastOK       time.Time
	lastTook     time.Duration
	notice       string
	noticeAt     time.Time
	noticeErr    bool

	prompt       promptKind
	input        textinput.Model
	filterBefore string

	showHelp bool
	help     help.Model

	tail  *tailer
	tails *sync.WaitGroup

	// tick returns the next refresh tick; tests replace it to drive time
	// themselves.
	tick func() tea.Cmd
}

// connHolder hands the dialed Source from the dial command to Run's cleanup
// even if the program exits while a dial is in flight.
type connHolder struct {
	mu     sync.Mutex
	src    Source
	closed bool
}

// set stores src; it returns false if the holder was closed, and the caller
// must then close src itself.
func (c *connHolder) set(src Source) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.src = src
	return true
}

func (c *connHolder) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.src != nil {
		c.src.Close()
		c.src = nil
	}
}

// tailer is one running consumer goroutine of the records view.
type tailer struct {
	id     int
	cancel context.CancelFunc
	ch     <-chan tailEvent
}

type tailEvent struct {
	rec client.Record
	err error
}

// newModel builds the root model. ctx bounds every command it issues.
func newModel(ctx context.Context, opts Options) *Model {
	th := defaultTheme()
	d := &shared{th: th, keys: defaultKeys(), tr: newTracker(opts.History, opts.Refresh/2), refresh: opts.Refresh, now: opts.Now()}
	m := &Model{opts: opts, ctx: ctx, conn: &connHolder{}, d: d, tails: &sync.WaitGroup{}}
	d.act = m
	m.overview, m.topics, m.topic = newOverview(d), newTopics(d), newTopicDetail(d)
	m.groups, m.group, m.records = newGroups(d), newGroupDetail(d), newRecords(d)
	m.panes = [numViews]pane{m.overview, m.topics, m.topic, m.groups, m.group, m.records}
	m.active = vOverview
	m.tick = m.tickCmd

	m.input = textinput.New()
	st := m.input.Styles()
	st.Focused.Prompt = th.key
	st.Blurred.Prompt = th.key
	m.input.SetStyles(st)
	m.input.ShowSuggestions = true
	m.input.CharLimit = 256

	m.help = help.New()
	m.help.Styles = help.Styles{
		Ellipsis: th.dim, ShortKey: th.key, ShortDesc: th.dim, ShortSeparator: th.dim,
		FullKey: th.key, FullDesc: lipgloss.NewStyle(), FullSeparator: th.dim,
	}
	m.help.ShortSeparator = "  "
	return m
}

// Init connects and starts the refresh tick.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.connectCmd(), m.tick())
}

func (m *Model) tickCmd() tea.Cmd {
	return tea.Tick(m.opts.Refresh, func(t time.Time) tea.Msg { return tickMsg{at: t} })
}

func (m *Model) connectCmd() tea.Cmd {
	m.dialing = true
	ctx, dial, conn := m.ctx, m.opts.Dial, m.conn
	return func() tea.Msg {
		src, err := dial(ctx)
		if err != nil {
			return connectedMsg{err: err}
		}
		if !conn.set(src) {
			src.Close() // the program ended while dialing
			return nil
		}
		return connectedMsg{src: src}
	}
}

// refreshCmds starts the fetches the current view needs, unless the same
// fetch is still in flight: a slow broker gets at most one outstanding
// snapshot and one detail request, never a pile-up.
func (m *Model) refreshCmds() []tea.Cmd {
	if m.src == nil {
		if !m.dialing {
			return []tea.Cmd{m.connectCmd()}
		}
		return nil
	}
	var cmds []tea.Cmd
	ctx, src, now := m.ctx, m.src, m.opts.Now
	timeout := m.opts.Refresh + refreshBudget
	if !m.refreshing {
		m.refreshing, m.refreshStart = true, now()
		cmds = append(cmds, func() tea.Msg {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return snapshotMsg{snap: fetchSnapshot(cctx, src, now)}
		})
	}
	if m.active == vTopic && m.topic.topic != "" && !m.detailBusy {
		m.detailBusy = true
		topic := m.topic.topic
		cmds = append(cmds, func() tea.Msg {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			td, err := fetchTopicDetail(cctx, src, topic)
			return topicDetailMsg{topic: topic, detail: td, err: err}
		})
	}
	return cmds
}

// refreshBudget bounds one refresh beyond the refresh interval; the client's
// per-request timeout is shorter, so this only catches a stuck sequence.
const refreshBudget = 15 * time.Second

// Update routes a message. It never blocks: anything that talks to the
// broker is returned as a command.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
		return m, nil

	case tickMsg:
		m.d.now = msg.at
		if m.notice != "" && msg.at.Sub(m.noticeAt) > noticeTTL {
			m.notice = ""
		}
		cmds := append([]tea.Cmd{m.tick()}, m.refreshCmds()...)
		return m, tea.Batch(cmds...)

	case connectedMsg:
		m.dialing = false
		if msg.err != nil {
			m.lastErr = msg.err
			return m, nil
		}
		m.src, m.lastErr = msg.src, nil
		cmds := m.refreshCmds()
		if m.active == vRecords && m.records.topic != "" && m.tail == nil {
			cmds = append(cmds, m.startTail(tailRequest{
				topic: m.records.topic, partition: m.records.partition, from: m.records.from, follow: m.records.live,
			}))
		}
		return m, tea.Batch(cmds...)

	case snapshotMsg:
		m.applySnapshot(msg.snap)
		return m, nil

	case topicDetailMsg:
		m.detailBusy = false
		return m, m.topic.update(msg)

	case recordsMsg:
		if m.tail == nil || m.tail.id != msg.id {
			return m, nil // a stopped tail's last words
		}
		cmd := m.records.update(msg)
		if msg.done {
			m.tail.cancel()
			m.tail = nil
			return m, cmd
		}
		return m, tea.Batch(cmd, waitTail(m.tail))

	case tea.MouseWheelMsg:
		if m.showHelp || m.prompt != promptNone {
			return m, nil
		}
		switch msg.Button {
		case tea.MouseWheelUp:
			return m, m.panes[m.active].update(scrollMsg{lines: -3})
		case tea.MouseWheelDown:
			return m, m.panes[m.active].update(scrollMsg{lines: 3})
		}
		return m, nil

	case tea.KeyPressMsg:
		return m, m.handleKey(msg)
	}
	// Anything else (cursor blink, paste) belongs to the prompt input.
	if m.prompt != promptNone {
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m *Model) applySnapshot(s *snapshot) {
	m.refreshing = false
	m.d.tr.observe(s)
	if s.err != nil {
		m.lastErr = s.err
		return
	}
	m.lastErr, m.lastOK, m.lastTook = nil, s.at, s.took
	m.d.snap, m.d.now = s, s.at
	for _, p := range m.panes {
		p.dataChanged()
	}
}

func (m *Model) resize(w, h int) {
	m.w, m.h = w, h
	bw, bh := w, max(h-chrome, 0)
	for _, p := range m.panes {
		p.setSize(bw, bh)
	}
	m.sizeInput()
	m.help.SetWidth(w)
}

func (m *Model) handleKey(msg tea.KeyPressMsg) tea.Cmd {
	k := m.d.keys
	if msg.String() == "ctrl+c" {
		return m.quit()
	}
	if m.prompt != promptNone {
		return m.promptKey(msg)
	}
	if m.showHelp {
		switch {
		case key.Matches(msg, k.Quit):
			return m.quit()
		case key.Matches(msg, k.Help), key.Matches(msg, k.Back):
			m.showHelp = false
		}
		return nil
	}
	switch {
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.showHelp = true
		return nil
	case key.Matches(msg, k.Command):
		return m.openPrompt(promptCommand)
	case key.Matches(msg, k.Filter):
		if _, ok := m.panes[m.active].(filterable); ok && !m.inDetail() {
			return m.openPrompt(promptFilter)
		}
		return nil
	case key.Matches(msg, k.Refresh):
		return tea.Batch(m.refreshCmds()...)
	case key.Matches(msg, k.Sort):
		if s, ok := m.panes[m.active].(sortable); ok {
			s.nextSort()
		}
		return nil
	case key.Matches(msg, k.Reverse):
		if s, ok := m.panes[m.active].(sortable); ok {
			s.reverseSort()
		}
		return nil
	case key.Matches(msg, k.Back):
		if !m.panes[m.active].back() {
			m.goBack()
		}
		return nil
	case key.Matches(msg, k.Overview):
		return m.navigate(navMsg{to: vOverview})
	case key.Matches(msg, k.Topics):
		return m.navigate(navMsg{to: vTopics})
	case key.Matches(msg, k.Groups):
		return m.navigate(navMsg{to: vGroups})
	case key.Matches(msg, k.Records):
		return m.navigate(navMsg{to: vRecords, topic: m.records.topic, partition: m.records.partition, reopen: true})
	}
	return m.panes[m.active].update(msg)
}

// inDetail reports whether the records view shows one record (where `/`
// has nothing to filter).
func (m *Model) inDetail() bool { return m.active == vRecords && m.records.detail != nil }

func (m *Model) quit() tea.Cmd {
	m.stopAnyTail()
	return tea.Quit
}

// navigate opens a view, remembering the current one for Esc.
func (m *Model) navigate(n navMsg) tea.Cmd {
	prev := m.active
	var cmds []tea.Cmd
	switch n.to {
	case vTopic:
		m.topic.open(n.topic)
		m.topic.dataChanged()
	case vGroup:
		m.group.open(n.group)
	case vRecords:
		same := n.topic == m.records.topic && n.partition == m.records.partition
		switch {
		case n.topic == "":
			// Records without a topic: the view explains how to pick one.
		case n.reopen && same && m.tail != nil:
			// Back to the running tail.
		default:
			from, follow := client.FromEnd(tailBack), true
			if n.hasStart {
				from, follow = n.start, false
			}
			cmds = append(cmds, m.startTail(tailRequest{topic: n.topic, partition: n.partition, from: from, follow: follow}))
		}
	}
	if n.to != vRecords {
		m.stopAnyTail()
	}
	if prev != n.to {
		m.history = append(m.history, prev)
		if len(m.history) > 32 {
			m.history = m.history[len(m.history)-32:]
		}
	}
	m.active = n.to
	m.showHelp = false
	// Detail views want fresh data now, not at the next tick.
	if n.to == vTopic {
		cmds = append(cmds, m.refreshCmds()...)
	}
	return tea.Batch(cmds...)
}

// goBack returns to the previous view (Esc).
func (m *Model) goBack() {
	for len(m.history) > 0 {
		prev := m.history[len(m.history)-1]
		m.history = m.history[:len(m.history)-1]
		if prev == m.active {
			continue
		}
		if m.active == vRecords {
			m.stopAnyTail()
		}
		m.active = prev
		return
	}
	if m.active != vOverview {
		if m.active == vRecords {
			m.stopAnyTail()
		}
		m.active = vOverview
		m.tick = m.tickCmd
	}
}

// startTail (re)starts the records consumer. The goroutine sends records on
// a channel the returned command drains; cancelling its context (view
// change, quit, Run's exit) stops it, and Run waits for it.
func (m *Model) startTail(t tailRequest) tea.Cmd {
	m.stopAnyTail()
	id := m.records.tailID + 1
	m.records.reset(t.topic, t.partition, t.from, t.follow, id)
	if m.src == nil {
		// Not connected yet: connectedMsg starts it.
		m.records.running = false
		m.records.stopped = "waiting for the connection"
		return nil
	}
	ctx, cancel := context.WithCancel(m.ctx)
	ch := make(chan tailEvent, 256)
	src := m.src
	m.tails.Add(1)
	go func() {
		defer m.tails.Done()
		defer close(ch)
		err := src.Consume(ctx, t.topic, t.from, func(r client.Record) error {
			if t.partition >= 0 && r.Partition != t.partition {
				return nil
			}
			select {
			case ch <- tailEvent{rec: r}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil && ctx.Err() == nil {
			select {
			case ch <- tailEvent{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	m.tail = &tailer{id: id, cancel: cancel, ch: ch}
	return waitTail(m.tail)
}

// stopTail stops the running tail if it is tail id (the records view's
// buffer is full).
func (m *Model) stopTail(id int) {
	if m.tail != nil && m.tail.id == id {
		m.stopAnyTail()
	}
}

// stopAnyTail stops whatever tail is running.
func (m *Model) stopAnyTail() {
	if m.tail != nil {
		m.tail.cancel()
		m.tail = nil
		m.records.running = false
	}
}

// waitTail blocks (in a command goroutine, never in Update) for the next
// records and returns them as one batch: whatever is already queued is
// drained too, so a burst costs one redraw. The batch that sees the channel
// close (or the consumer's error) is marked done.
func waitTail(t *tailer) tea.Cmd {
	id, ch := t.id, t.ch
	return func() tea.Msg {
		var recs []client.Record
		ev, ok := <-ch
		for {
			if !ok {
				return recordsMsg{id: id, recs: recs, done: true}
			}
			if ev.err != nil {
				return recordsMsg{id: id, recs: recs, done: true, err: ev.err}
			}
			recs = append(recs, ev.rec)
			if len(recs) >= 512 {
				return recordsMsg{id: id, recs: recs}
			}
			select {
			case ev, ok = <-ch:
			default:
				return recordsMsg{id: id, recs: recs}
			}
		}
	}
}

func (m *Model) setNotice(s string, isErr bool) {
	m.notice, m.noticeAt, m.noticeErr = s, m.d.now, isErr
}

// openPrompt shows the prompt line for filter, command or jump input.
func (m *Model) openPrompt(kind promptKind) tea.Cmd {
	m.prompt = kind
	m.input.Reset()
	m.input.SetSuggestions(nil)
	switch kind {
	case promptFilter:
		f := m.panes[m.active].(filterable)
		m.filterBefore = f.filterText()
		m.input.Prompt = "/"
		m.input.Placeholder = "filter (enter keeps, esc clears)"
		m.input.SetValue(m.filterBefore)
	case promptCommand:
		m.input.Prompt = ":"
		m.input.Placeholder = commandPlaceholder
		m.input.SetSuggestions(m.commandSuggestions())
	case promptJump:
		m.input.Prompt = "jump to: "
		m.input.Placeholder = jumpPlaceholder
	}
	m.sizeInput()
	m.input.CursorEnd()
	return m.input.Focus()
}

// The placeholders say what a prompt takes. Each fits, with its prompt, on
// the status line of an 80-column terminal (the golden test checks it):
// the input is as wide as the line, and a placeholder wider than the input
// is cut mid-word.
const (
	commandPlaceholder = "overview | topics | groups | topic T | group G | records T [P] | quit"
	jumpPlaceholder    = "offset, -N, earliest, latest, 5m ago, 2026-05-01T12:00:00Z or @millis"
)

// sizeInput gives the prompt's input the rest of the status line: the line
// starts with a space, then the prompt, and the cursor may sit one past the
// end.
func (m *Model) sizeInput() {
	m.input.SetWidth(max(m.w-2-lipgloss.Width(m.input.Prompt), 10))
}

func (m *Model) commandSuggestions() []string {
	sugg := []string{"overview", "topics", "groups", "records ", "help", "quit"}
	if s := m.d.snap; s != nil {
		for _, t := range s.topics {
			sugg = append(sugg, "topic "+t.Name, "records "+t.Name)
		}
		for _, g := range s.groups {
			sugg = append(sugg, "group "+g.summary.Name)
		}
	}
	return sugg
}

func (m *Model) promptKey(msg tea.KeyPressMsg) tea.Cmd {
	switch msg.String() {
	case "esc":
		if m.prompt == promptFilter {
			m.panes[m.active].(filterable).setFilter(m.filterBefore)
		}
		m.closePrompt()
		return nil
	case "enter":
		kind, text := m.prompt, m.input.Value()
		m.closePrompt()
		switch kind {
		case promptCommand:
			return m.runCommand(text)
		case promptJump:
			return m.records.update(jumpMsg{text: text})
		}
		return nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	if m.prompt == promptFilter {
		// Filter as you type.
		m.panes[m.active].(filterable).setFilter(strings.TrimSpace(m.input.Value()))
	}
	return cmd
}

func (m *Model) closePrompt() {
	m.prompt = promptNone
	m.input.Blur()
}

// runCommand executes a `:` command.
func (m *Model) runCommand(text string) tea.Cmd {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return nil
	}
	arg := ""
	if len(fields) > 1 {
		arg = fields[1]
	}
	switch strings.ToLower(fields[0]) {
	case "overview", "ov", "o", "home", "1":
		return m.navigate(navMsg{to: vOverview})
	case "topics", "tp", "2":
		return m.navigate(navMsg{to: vTopics})
	case "topic", "t":
		if arg == "" {
			return m.navigate(navMsg{to: vTopics})
		}
		return m.navigate(navMsg{to: vTopic, topic: arg})
	case "groups", "cg", "consumergroups", "3":
		return m.navigate(navMsg{to: vGroups})
	case "group", "g":
		if arg == "" {
			return m.navigate(navMsg{to: vGroups})
		}
		return m.navigate(navMsg{to: vGroup, group: arg})
	case "records", "rec", "r", "tail", "4":
		if arg == "" {
			return m.navigate(navMsg{to: vRecords, topic: m.records.topic, partition: m.records.partition, reopen: true})
		}
		part := int32(-1)
		if len(fields) > 2 {
			p, err := strconv.ParseInt(fields[2], 10, 32)
			if err != nil || p < 0 {
				m.setNotice(fmt.Sprintf("records: partition %q is not a partition number", fields[2]), true)
				return nil
			}
			part = int32(p)
		}
		return m.navigate(navMsg{to: vRecords, topic: arg, partition: part})
	case "help", "?":
		m.showHelp = true
		return nil
	case "quit", "q", "exit":
		return m.quit()
	}
	m.setNotice(fmt.Sprintf("unknown view %q: try overview, topics, groups, topic NAME, group NAME, records TOPIC", fields[0]), true)
	return nil
}

// explain renders an error for the status line: the Kafka error name when
// there is one, and the plain-language explanation.
func explain(err error) string {
	if err == nil {
		return ""
	}
	s := client.Explain(err)
	if name := client.ErrorName(err); name != "" && !strings.Contains(s, name) {
		s = name + ": " + s
	}
	return s
}
