package tui

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

// recActions records what views ask of the root.
type recActions struct {
	navs    []navMsg
	prompts []promptKind
	tails   []tailRequest
	stops   []int
}

func (a *recActions) navigate(n navMsg) tea.Cmd       { a.navs = append(a.navs, n); return nil }
func (a *recActions) openPrompt(k promptKind) tea.Cmd { a.prompts = append(a.prompts, k); return nil }
func (a *recActions) startTail(t tailRequest) tea.Cmd { a.tails = append(a.tails, t); return nil }
func (a *recActions) stopTail(id int)                 { a.stops = append(a.stops, id) }

func (a *recActions) lastNav(t *testing.T) navMsg {
	t.Helper()
	require.NotEmpty(t, a.navs, "no navigation requested")
	return a.navs[len(a.navs)-1]
}

func newShared() (*shared, *recActions) {
	act := &recActions{}
	return &shared{
		th: defaultTheme(), keys: defaultKeys(), tr: newTracker(time.Minute, 500*time.Millisecond),
		refresh: time.Second, now: t0, act: act,
	}, act
}

// feed gives the shared data a snapshot, as the root does.
func feed(d *shared, s *snapshot) {
	d.tr.observe(s)
	d.snap, d.now = s, s.at
}

// demoSnapshots returns two snapshots of the demo cluster one second
// apart, with traffic on orders and commits by billing in between.
func demoSnapshots(t *testing.T) (*snapshot, *snapshot) {
	t.Helper()
	src := demoSource()
	ctx := t.Context()
	s1 := fetchSnapshot(ctx, src, func() time.Time { return t0 })
	for p := range src.ends["orders"] {
		src.ends["orders"][p] += 100
	}
	d := src.groupDescs["billing"]
	d.Offsets[1].Committed += 40
	src.groupDescs["billing"] = d
	s2 := fetchSnapshot(ctx, src, func() time.Time { return t0.Add(time.Second) })
	require.NoError(t, s1.err)
	require.NoError(t, s2.err)
	return s1, s2
}

// requireFrame checks the frame invariant: exactly h lines of exactly w
// cells, so the renderer never leaves stale cells behind.
func requireFrame(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	require.Len(t, lines, h)
	for i, l := range lines {
		require.Equal(t, w, ansi.StringWidth(l), "line %d: %q", i, ansi.Strip(l))
	}
}

func rowKeys(tb *table) []string {
	out := make([]string, len(tb.rows))
	for i, r := range tb.rows {
		out[i] = r.key
	}
	return out
}

func TestTopicsViewSortFilterOpen(t *testing.T) {
	d, act := newShared()
	m := newTopics(d)
	m.setSize(80, 20)
	s1, s2 := demoSnapshots(t)
	feed(d, s1)
	feed(d, s2)
	m.dataChanged()
	require.Equal(t, []string{"__consumer_offsets", "audit.events.customer-profile-changes.v2", "orders", "payments"}, rowKeys(&m.tbl))
	requireFrame(t, m.view(), 80, 20)

	// s cycles columns; numeric ones start largest first.
	m.nextSort() // PART
	require.Equal(t, tcParts, m.sort.col)
	require.True(t, m.sort.desc)
	require.Equal(t, "__consumer_offsets", rowKeys(&m.tbl)[0])
	for m.sort.col != tcIn {
		m.nextSort()
	}
	require.Equal(t, "orders", rowKeys(&m.tbl)[0], "busiest topic first")
	require.Contains(t, ansi.Strip(m.view()), "IN/s▼")
	m.reverseSort()
	require.NotEqual(t, "orders", rowKeys(&m.tbl)[0])

	// The cursor stays on its topic when the order changes.
	m.tbl.cursor = 0
	for i, k := range rowKeys(&m.tbl) {
		if k == "payments" {
			m.tbl.cursor = i
		}
	}
	m.nextSort()
	r, ok := m.tbl.selected()
	require.True(t, ok)
	require.Equal(t, "payments", r.key)

	// Filter narrows, Esc (back) clears it first.
	m.setFilter("PAY")
	require.Equal(t, []string{"payments"}, rowKeys(&m.tbl))
	require.Contains(t, ansi.Strip(m.view()), `1 of 4, filter "PAY"`)
	m.setFilter("nothing-matches")
	require.Contains(t, ansi.Strip(m.view()), `no topic matches "nothing-matches"`)
	require.True(t, m.back())
	require.Empty(t, m.filterText())
	require.False(t, m.back(), "nothing left to undo: the root goes back")

	// Enter opens the topic under the cursor, t tails it.
	m.sort = sortSpec{}
	m.dataChanged()
	m.tbl.top()
	m.update(keyMsg("j"))
	m.update(keyMsg("j"))
	m.update(keyMsg("enter"))
	require.Equal(t, navMsg{to: vTopic, topic: "orders"}, act.lastNav(t))
	m.update(keyMsg("t"))
	require.Equal(t, navMsg{to: vRecords, topic: "orders", partition: -1}, act.lastNav(t))
	m.update(scrollMsg{lines: 3})
	require.Equal(t, 3, m.tbl.cursor, "wheel scrolls, clamped to the last row")
	m.update(keyMsg("g"))
	require.Equal(t, 0, m.tbl.cursor)

	// Resizing keeps every frame exact, down to the minimum.
	for _, sz := range [][2]int{{40, 6}, {200, 50}, {80, 20}} {
		m.setSize(sz[0], sz[1])
		requireFrame(t, m.view(), sz[0], sz[1])
	}
}

func TestTopicsViewBeforeData(t *testing.T) {
	d, _ := newShared()
	m := newTopics(d)
	m.setSize(60, 5)
	require.Contains(t, ansi.Strip(m.view()), "waiting for the first answer")
	m.update(keyMsg("enter")) // nothing selected: no panic, no navigation
	requireFrame(t, m.view(), 60, 5)
}

func TestTopicDetailView(t *testing.T) {
	d, act := newShared()
	m := newTopicDetail(d)
	m.setSize(120, 20)
	s1, s2 := demoSnapshots(t)
	feed(d, s1)
	feed(d, s2)
	m.open("orders")
	require.Contains(t, ansi.Strip(m.view()), "loading")

	src := demoSource()
	td, err := fetchTopicDetail(t.Context(), src, "orders")
	require.NoError(t, err)
	m.update(topicDetailMsg{topic: "payments", detail: td}) // a late answer for another topic
	require.Nil(t, m.detail)
	m.update(topicDetailMsg{topic: "orders", detail: td})
	require.Equal(t, []string{"0", "1", "2"}, rowKeys(&m.parts))
	require.Equal(t, []string{"max.message.bytes", "retention.ms", "cleanup.policy", "segment.bytes"}, rowKeys(&m.configs),
		"overrides first")
	view := ansi.Strip(m.view())
	require.Contains(t, view, "39990", "last stable offset of partition 1")
	require.Contains(t, view, "(offline 3)")
	require.Contains(t, view, "in 300/s", "100 records/s on each of 3 partitions")
	requireFrame(t, m.view(), 120, 20)

	// Tab moves focus to the configs; Enter there opens nothing.
	m.update(keyMsg("tab"))
	require.True(t, m.configs.focused)
	require.False(t, m.parts.focused)
	m.update(keyMsg("j"))
	require.Equal(t, 1, m.configs.cursor)
	m.update(keyMsg("enter"))
	require.Empty(t, act.navs)
	m.update(keyMsg("tab"))
	m.update(keyMsg("j"))
	m.update(keyMsg("enter"))
	require.Equal(t, navMsg{to: vRecords, topic: "orders", partition: 1}, act.lastNav(t))
	m.update(keyMsg("t"))
	require.Equal(t, navMsg{to: vRecords, topic: "orders", partition: -1}, act.lastNav(t))

	// A failed refresh keeps the data and says it is stale.
	m.update(topicDetailMsg{topic: "orders", err: errBrokerDown})
	require.Len(t, m.parts.rows, 3)
	require.Contains(t, ansi.Strip(m.view()), "stale:")

	// Opening another topic drops the old one's rows.
	m.open("payments")
	require.Empty(t, m.parts.rows)
	m.update(topicDetailMsg{topic: "payments", err: &client.Error{Op: "describe topic", Err: client.ErrNotFound}})
	require.Contains(t, ansi.Strip(m.view()), "cannot describe topic")
}

func TestGroupsView(t *testing.T) {
	d, act := newShared()
	m := newGroups(d)
	m.setSize(140, 10)
	s1, s2 := demoSnapshots(t)
	feed(d, s1)
	feed(d, s2)
	m.dataChanged()
	require.Equal(t, []string{"analytics", "billing"}, rowKeys(&m.tbl))
	view := ansi.Strip(m.view())
	require.Regexp(t, `billing +Stable +cooperative-sticky +2 +60 +40 `, view)
	// An empty group has no protocol: NULL, as MQL's SHOW GROUPS shows it.
	require.Regexp(t, `analytics +Empty +NULL +0 +800 `, view)
	requireFrame(t, m.view(), 140, 10)

	for m.sort.col != gcLag {
		m.nextSort()
	}
	require.Equal(t, []string{"analytics", "billing"}, rowKeys(&m.tbl), "largest lag first")
	m.reverseSort()
	require.Equal(t, []string{"billing", "analytics"}, rowKeys(&m.tbl))

	m.setFilter("stable") // filters on state too
	require.Equal(t, []string{"billing"}, rowKeys(&m.tbl))
	m.update(keyMsg("enter"))
	require.Equal(t, navMsg{to: vGroup, group: "billing"}, act.lastNav(t))
	require.True(t, m.back())

	// A broker without consumer groups explains itself.
	s3 := *s2
	s3.at = s2.at.Add(time.Second)
	s3.groups, s3.groupsErr = nil, &client.Error{Op: "list groups", Err: errors.New("unknown request key 16"), Kafka: nil}
	feed(d, &s3)
	m.dataChanged()
	require.Contains(t, ansi.Strip(m.view()), "cannot list groups")
}

func TestGroupDetailView(t *testing.T) {
	d, act := newShared()
	m := newGroupDetail(d)
	m.setSize(100, 20)
	s1, s2 := demoSnapshots(t)
	feed(d, s1)
	feed(d, s2)
	m.open("billing")
	require.Len(t, m.members.rows, 2)
	require.Len(t, m.offsets.rows, 3)
	require.True(t, m.offsets.focused, "offsets have focus first")
	view := ansi.Strip(m.view())
	require.Contains(t, view, "billing-9a1d-77b0 (billing-2)")
	require.Contains(t, view, "orders[0,1]")
	require.Contains(t, view, "commits 40/s")
	requireFrame(t, m.view(), 100, 20)

	// Enter on an offset shows the records from the committed offset.
	m.update(keyMsg("j"))
	m.update(keyMsg("enter"))
	n := act.lastNav(t)
	require.Equal(t, vRecords, n.to)
	require.Equal(t, "orders", n.topic)
	require.Equal(t, int32(1), n.partition)
	require.True(t, n.hasStart)
	require.Equal(t, client.Offset(39_990).String(), n.start.String())

	m.update(keyMsg("tab"))
	require.True(t, m.members.focused)
	m.update(keyMsg("enter"))
	require.Len(t, act.navs, 1, "members do not open anything")

	// An empty group: no members, no protocol (NULL, as in MQL's
	// DESCRIBE GROUP), offsets without a member (NULL).
	m.open("analytics")
	view = ansi.Strip(m.view())
	require.Contains(t, view, "type consumer · protocol NULL · coordinator 1")
	require.Regexp(t, `payments +0 +1000 +1500 +500 NULL`, view)

	// The group disappears.
	m.open("billing")
	s3 := *s2
	s3.at = s2.at.Add(time.Second)
	s3.groups = s3.groups[:1]
	feed(d, &s3)
	m.dataChanged()
	require.Contains(t, ansi.Strip(m.view()), "no longer exists")
	requireFrame(t, m.view(), 100, 20)
}

func TestOverviewView(t *testing.T) {
	d, act := newShared()
	m := newOverview(d)
	m.setSize(80, 20)
	require.Contains(t, ansi.Strip(m.view()), "waiting for the first answer")
	s1, s2 := demoSnapshots(t)
	feed(d, s1)
	feed(d, s2)
	m.dataChanged()
	view := ansi.Strip(m.view())
	require.Contains(t, view, "up, controller")
	require.Contains(t, view, "300 rec/s", "produce rate over user topics")
	require.Contains(t, view, "40 rec/s", "consume rate from commits")
	require.NotContains(t, view, "__consumer_offsets", "internal topics are not top topics")
	requireFrame(t, m.view(), 80, 20)

	m.update(keyMsg("enter"))
	require.Equal(t, navMsg{to: vTopic, topic: "orders"}, act.lastNav(t))
	m.update(keyMsg("t"))
	require.Equal(t, navMsg{to: vRecords, topic: "orders", partition: -1}, act.lastNav(t))

	// A broker leaves the metadata: it is shown as down.
	s3 := *s2
	s3.at = s2.at.Add(30 * time.Second)
	s3.cluster.Brokers = s3.cluster.Brokers[:2]
	feed(d, &s3)
	m.dataChanged()
	require.Contains(t, ansi.Strip(m.view()), "down, seen 30s ago")

	// A broker never seen, whose replicas the metadata still names (down
	// since before the dashboard started), and partitions that lost it.
	s4 := s3
	s4.at = s3.at.Add(time.Second)
	s4.cluster.Down = []int32{3, 4}
	s4.cluster.Replicas = map[int32]int{1: 3, 2: 3, 3: 3, 4: 1}
	s4.cluster.Leaders = map[int32]int{1: 2, 2: 1}
	s4.cluster.Partitions, s4.cluster.UnderReplicated, s4.cluster.Offline = 6, 3, 1
	feed(d, &s4)
	m.dataChanged()
	view = ansi.Strip(m.view())
	require.Contains(t, view, "Brokers 2 up, 2 down")
	require.Regexp(t, `(?m)^\s+4 NULL\s+NULL\s+0\s+1 down\s*$`, view)
	require.Contains(t, view, "1 offline  3 under-replicated of 6 partitions")
	requireFrame(t, m.view(), 80, 20)
}

// Open transactions are counted next to the partition health when the
// brokers can list them, and left out quietly when they cannot.
func TestOverviewTransactions(t *testing.T) {
	d, _ := newShared()
	m := newOverview(d)
	m.setSize(80, 20)
	_, s := demoSnapshots(t)
	require.NoError(t, s.txnsErr)
	feed(d, s)
	m.dataChanged()
	require.Contains(t, ansi.Strip(m.view()), "of 3 partitions · 1 open transaction")

	s2 := *s
	s2.txns = append(slices.Clone(s.txns), client.TransactionSummary{ID: "x", State: client.TxnStatePrepareCommit})
	feed(d, &s2)
	m.dataChanged()
	require.Contains(t, ansi.Strip(m.view()), "· 2 open transactions")

	s2.txns = s.txns[1:] // only a completed one
	feed(d, &s2)
	m.dataChanged()
	require.Contains(t, ansi.Strip(m.view()), "· no open transactions")

	s2.txns, s2.txnsErr = nil, &client.Error{Op: "list transactions", Err: client.ErrUnsupported}
	feed(d, &s2)
	m.dataChanged()
	require.NotContains(t, ansi.Strip(m.view()), "transaction")
	requireFrame(t, m.view(), 80, 20)
}

func records(topic string, n int, start time.Time) []client.Record {
	out := make([]client.Record, n)
	for i := range out {
		out[i] = client.Record{Topic: topic, Partition: int32(i % 2), Offset: int64(i / 2),
			Timestamp: start.Add(time.Duration(i) * time.Millisecond), Value: []byte("v" + strconv.Itoa(i))}
	}
	return out
}

func TestRecordsViewTail(t *testing.T) {
	d, act := newShared()
	m := newRecords(d)
	m.setSize(80, 12)
	require.Contains(t, ansi.Strip(m.view()), "no topic chosen")
	m.update(keyMsg("f")) // no topic: nothing to follow
	require.Empty(t, act.tails)

	m.reset("orders", -1, client.FromEnd(tailBack), true, 7)
	require.Contains(t, ansi.Strip(m.view()), "waiting for records")
	recs := records("orders", 6, t0)
	// Out of order, as partitions arrive: the view orders by time.
	m.update(recordsMsg{id: 7, recs: []client.Record{recs[3], recs[1], recs[5]}})
	m.update(recordsMsg{id: 7, recs: []client.Record{recs[0], recs[2], recs[4]}})
	m.update(recordsMsg{id: 6, recs: records("old", 3, t0)}) // a stopped tail's leftovers
	require.Len(t, m.recs, 6)
	for i := range m.recs {
		require.Equal(t, recs[i].Value, m.recs[i].Value)
	}
	require.Equal(t, 5, m.tbl.cursor, "following: cursor on the newest")
	require.Contains(t, ansi.Strip(m.view()), "following live")
	requireFrame(t, m.view(), 80, 12)

	// Moving up pauses auto-scroll; new records keep the cursor in place.
	m.update(keyMsg("k"))
	require.False(t, m.follow)
	more := records("orders", 8, t0.Add(time.Second))[6:]
	m.update(recordsMsg{id: 7, recs: more})
	sel, ok := m.selectedIndex()
	require.True(t, ok)
	require.Equal(t, []byte("v4"), m.recs[sel].Value)
	require.Contains(t, ansi.Strip(m.view()), "scrolled back")
	m.update(keyMsg("G"))
	require.True(t, m.follow)
	require.Equal(t, 7, m.tbl.cursor)

	// Enter shows the record; Esc returns to the list.
	m.update(keyMsg("enter"))
	require.NotNil(t, m.detail)
	require.Contains(t, ansi.Strip(m.view()), "Record orders/1 @ 3")
	m.update(keyMsg("down")) // scrolls the detail, not the list
	require.Equal(t, 7, m.tbl.cursor)
	require.True(t, m.back())
	require.Nil(t, m.detail)

	// Filter on values.
	m.setFilter("v1")
	require.Len(t, m.tbl.rows, 1)
	require.True(t, m.back())

	// Following, the buffer keeps the newest recordsCap records.
	m.update(recordsMsg{id: 7, recs: records("orders", recordsCap, t0.Add(time.Hour))})
	require.Len(t, m.recs, recordsCap)
	require.Equal(t, int64(8), m.dropped)
	require.Empty(t, act.stops)

	// The consumer fails.
	m.update(recordsMsg{id: 7, done: true, err: errBrokerDown})
	require.False(t, m.running)
	require.Contains(t, ansi.Strip(m.view()), "stopped")

	// f restarts a live tail; o asks for a position.
	m.update(keyMsg("f"))
	require.Len(t, act.tails, 1)
	require.True(t, act.tails[0].follow)
	m.update(keyMsg("o"))
	require.Equal(t, []promptKind{promptJump}, act.prompts)
}

func TestRecordsViewJump(t *testing.T) {
	d, act := newShared()
	m := newRecords(d)
	m.setSize(80, 12)
	m.reset("orders", 1, client.FromEnd(tailBack), true, 1)

	m.update(jumpMsg{text: "100"})
	require.Equal(t, tailRequest{topic: "orders", partition: 1, from: client.Offset(100)}, act.tails[0])
	m.update(jumpMsg{text: "5m"})
	require.Equal(t, client.Timestamp(t0.Add(-5*time.Minute)).String(), act.tails[1].from.String())
	m.update(jumpMsg{text: "2026-05-01T11:00:00Z"})
	require.Equal(t, client.Timestamp(t0.Add(-time.Hour)).String(), act.tails[2].from.String())
	m.update(jumpMsg{text: "next tuesday"})
	require.Len(t, act.tails, 3)
	require.Contains(t, ansi.Strip(m.view()), "jump:")

	// After a jump, reading stops when the buffer is full, keeping the
	// records jumped to; other partitions are not shown.
	m.reset("orders", 1, client.Offset(100), false, 2)
	m.update(recordsMsg{id: 2, recs: records("orders", 2*recordsCap+10, t0)})
	require.Len(t, m.recs, recordsCap)
	require.Equal(t, int32(1), m.recs[0].Partition)
	require.Equal(t, int64(0), m.recs[0].Offset)
	require.Equal(t, []int{2}, act.stops)
	require.Equal(t, 0, m.tbl.cursor, "a jump starts at the top")
	require.Contains(t, ansi.Strip(m.view()), "stopped after")
}

// protocolOf tells a group without a protocol (NULL) from one that could
// not be described (–).
func TestProtocolOf(t *testing.T) {
	require.Equal(t, unknown, protocolOf(groupState{}))
	require.Equal(t, null, protocolOf(groupState{desc: &client.GroupDescription{ProtocolType: "consumer"}}))
	require.Equal(t, "range", protocolOf(groupState{desc: &client.GroupDescription{ProtocolType: "consumer", Protocol: "range"}}))
}

func TestParseJump(t *testing.T) {
	for in, want := range map[string]client.Position{
		"0":        client.Offset(0),
		"42":       client.Offset(42),
		"-10":      client.FromEnd(10),
		"earliest": client.Earliest(),
		"latest":   client.Latest(),
		"90s":      client.Timestamp(t0.Add(-90 * time.Second)),
		"-1h":      client.Timestamp(t0.Add(-time.Hour)),
		"@0":       client.Timestamp(time.UnixMilli(0)),
		// The forms MQL's TIMESTAMP takes too (internal/when).
		"2d":                   client.Timestamp(t0.Add(-48 * time.Hour)),
		"5m ago":               client.Timestamp(t0.Add(-5 * time.Minute)),
		"2026-05-01":           client.Timestamp(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)),
		"2026-05-01 11:00:00":  client.Timestamp(time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC)),
		"2026-05-01T11:00:00Z": client.Timestamp(time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC)),
	} {
		got, err := parseJump(in, t0)
		require.NoError(t, err, in)
		require.Equal(t, want.String(), got.String(), in)
	}
	for _, in := range []string{"", "  ", "soon", "1x", "@x"} {
		_, err := parseJump(in, t0)
		require.Error(t, err, in)
	}
}

// The COMPACT column: empty for a topic that is not compacted, the
// largest dirty ratio of a compacted one, "yes" when the broker does not
// report it (Kafka), unknown when the policy could not be read; sorting by
// it puts the dirtiest first.
func TestTopicsViewCompactColumn(t *testing.T) {
	for _, tc := range []struct {
		ti   client.TopicInfo
		want string
	}{
		{client.TopicInfo{CleanupPolicy: "delete", DirtyRatio: -1}, ""},
		{client.TopicInfo{CleanupPolicy: "compact", DirtyRatio: 0.416}, "42%"},
		{client.TopicInfo{CleanupPolicy: "delete,compact", DirtyRatio: 0}, "0%"},
		{client.TopicInfo{CleanupPolicy: "compact", DirtyRatio: 0.001}, "<1%"},
		{client.TopicInfo{CleanupPolicy: "compact", DirtyRatio: -1}, "yes"},
		{client.TopicInfo{DirtyRatio: -1}, "–"},
	} {
		require.Equal(t, tc.want, fmtCompact(tc.ti), "%+v", tc.ti)
	}

	d, _ := newShared()
	m := newTopics(d)
	m.setSize(80, 20)
	src := demoSource()
	addProfiles(src)
	src.topics[1].CleanupPolicy = "" // not readable (no DESCRIBE_CONFIGS)
	feed(d, fetchSnapshot(t.Context(), src, func() time.Time { return t0 }))
	m.dataChanged()
	for m.sort.col != tcCompact {
		m.nextSort()
	}
	require.True(t, m.sort.desc)
	require.Equal(t, []string{"profiles", "__consumer_offsets", "orders", "payments", "audit.events.customer-profile-changes.v2"}, rowKeys(&m.tbl))
	view := ansi.Strip(m.view())
	require.Contains(t, view, "Topics 5 · 2 compacted")
	require.Contains(t, view, "COMPACT▼")
	requireFrame(t, m.view(), 80, 20)
}

// A compacted topic on a broker that reports no cleaner state (Kafka):
// the compaction pane lists the partitions with every value unknown and
// says why; an uncleanable reason and a running cleaning show in STATUS
// when reported.
func TestTopicDetailCompactionPane(t *testing.T) {
	d, _ := newShared()
	m := newTopicDetail(d)
	m.setSize(100, 24)
	m.open("table")
	desc := client.TopicDescription{Name: "table",
		Partitions: []client.PartitionInfo{{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, State: "online"}},
		Configs:    []client.ConfigEntry{{Name: "cleanup.policy", Value: "compact", Source: "topic"}}}
	m.update(topicDetailMsg{topic: "table", detail: topicDetail{desc: desc}})
	view := ansi.Strip(m.view())
	require.Contains(t, view, "Compaction cleanup.policy compact · the broker reports no cleaner state")
	require.Equal(t, []string{"0", "–", "–", "–", "–", "–", "–", ""}, m.compact.rows[0].cells)
	requireFrame(t, m.view(), 100, 24)

	desc.Partitions[0].Compaction = &client.Compaction{DirtyRatio: 0.9, Cleaning: true, LastCleaned: t0.Add(-90 * time.Second), LastDuration: 1500 * time.Microsecond}
	desc.Configs = append(desc.Configs, client.ConfigEntry{Name: "min.cleanable.dirty.ratio", Value: "0.25", Source: "topic"})
	m.update(topicDetailMsg{topic: "table", detail: topicDetail{desc: desc}})
	require.Equal(t, []string{"0", "90%", "0 B", "0s", "0", "1m ago", "2ms", "cleaning"}, m.compact.rows[0].cells)
	require.Contains(t, ansi.Strip(m.view()), "Compaction cleanup.policy compact · cleaned once dirty > 25%")

	// A reason is the broker's text: shown escaped, never as a control
	// sequence; the frame holds at any size.
	desc.Partitions[0].Compaction = &client.Compaction{Uncleanable: "bad\x1b[2J segment\nhere"}
	m.update(topicDetailMsg{topic: "table", detail: topicDetail{desc: desc}})
	require.Equal(t, `uncleanable: bad\x1b[2J segment here`, m.compact.rows[0].cells[7])
	for _, size := range [][2]int{{40, 6}, {60, 8}, {80, 24}} {
		m.setSize(size[0], size[1])
		requireFrame(t, m.view(), size[0], size[1])
	}
	m.setSize(100, 24)

	// Altered to delete while shown: the pane goes, and focus with it.
	m.setFocus(paneCompact)
	desc.Configs[0].Value = "delete"
	m.update(topicDetailMsg{topic: "table", detail: topicDetail{desc: desc}})
	require.NotContains(t, ansi.Strip(m.view()), "Compaction")
	require.Equal(t, paneParts, m.focus)
	requireFrame(t, m.view(), 100, 24)
}
