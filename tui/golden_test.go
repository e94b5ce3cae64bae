package tui

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// plain strips ANSI sequences (what a no-colour terminal shows, minus
// attributes) and trailing spaces, for readable goldens.
func plain(s string) string {
	lines := strings.Split(ansi.Strip(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// requireGolden compares got with testdata/golden/name.txt.
func requireGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden; run go test ./tui -run Golden -update")
	require.Equal(t, string(want), got, "view differs from %s (run with -update to accept)", path)
}

// demoSource is a small but realistic cluster: three brokers, user topics
// of different shapes, an internal topic, two groups and a few records of
// every kind of payload.
func demoSource() *fakeSource {
	f := newFakeSource()
	f.cluster = client.ClusterInfo{ID: "mq-prod-eu1", Controller: 2, Brokers: []client.Broker{
		{ID: 1, Host: "10.0.0.11", Port: 9092, Rack: "eu1-a"},
		{ID: 2, Host: "10.0.0.12", Port: 9092, Rack: "eu1-b"},
		{ID: 3, Host: "10.0.0.13", Port: 9092, Rack: "eu1-c"},
	}}
	f.topics = []client.TopicInfo{
		{Name: "__consumer_offsets", Partitions: 50, Replicas: 3, Internal: true, Records: 812, Bytes: 81_920,
			CleanupPolicy: "compact", DirtyRatio: 0.12},
		{Name: "audit.events.customer-profile-changes.v2", Partitions: 1, Replicas: 3, Records: 42, Bytes: 9_000,
			CleanupPolicy: "delete", DirtyRatio: -1},
		{Name: "orders", Partitions: 3, Replicas: 3, Records: 120_000, Bytes: 52_428_800, CleanupPolicy: "delete", DirtyRatio: -1},
		{Name: "payments", Partitions: 2, Replicas: 3, Records: 3_000, Bytes: 1_048_576, CleanupPolicy: "delete", DirtyRatio: -1},
	}
	f.ends = map[string]map[int32]int64{
		"__consumer_offsets":                       {0: 812},
		"audit.events.customer-profile-changes.v2": {0: 42},
		"orders":   {0: 40_000, 1: 40_000, 2: 40_000},
		"payments": {0: 1_500, 1: 1_500},
	}
	f.stable = map[string]map[int32]int64{"orders": {0: 40_000, 1: 39_990, 2: 40_000}}
	// The transaction holding orders[1]'s stable offset back, and one
	// that ended.
	f.txns = []client.TransactionSummary{
		{ID: "orders-writer-1", ProducerID: 4001, State: client.TxnStateOngoing, Coordinator: 1},
		{ID: "payments-writer", ProducerID: 4002, State: client.TxnStateCompleteCommit, Coordinator: 2},
	}
	f.txnsErr = nil
	f.descs["orders"] = client.TopicDescription{
		Name: "orders", ID: "3f2a9c1e",
		Partitions: []client.PartitionInfo{
			{Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, State: "online", LogStart: 0, HighWatermark: 40_000, Bytes: 17_476_266},
			{Partition: 1, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{1, 2}, Offline: []int32{3}, State: "online", LogStart: 0, HighWatermark: 40_000, Bytes: 17_476_267},
			{Partition: 2, Leader: 3, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2, 3}, State: "damaged", LogStart: 1_000, HighWatermark: 40_000, Bytes: 17_476_267,
				Corrupt: []client.CorruptRange{{FromOffset: 12_000, ToOffset: 12_050, Reason: "crc mismatch"}}},
		},
		Configs: []client.ConfigEntry{
			{Name: "cleanup.policy", Value: "delete", Source: "default", Default: true},
			{Name: "retention.ms", Value: "86400000", Source: "topic"},
			{Name: "segment.bytes", Value: "1073741824", Source: "default", Default: true},
			{Name: "max.message.bytes", Value: "2097152", Source: "topic"},
		},
	}
	f.groups = []client.GroupSummary{
		{Name: "analytics", State: "Empty", ProtocolType: "consumer", Coordinator: 1},
		{Name: "billing", State: "Stable", ProtocolType: "consumer", Coordinator: 2},
	}
	f.groupDescs = map[string]client.GroupDescription{
		"analytics": {Name: "analytics", State: "Empty", ProtocolType: "consumer", Coordinator: 1,
			Offsets: []client.GroupOffset{
				{Topic: "payments", Partition: 0, Committed: 1_000, End: 1_500, Lag: 500},
				{Topic: "payments", Partition: 1, Committed: 1_200, End: 1_500, Lag: 300},
			}, TotalLag: 800},
		"billing": {Name: "billing", State: "Stable", ProtocolType: "consumer", Protocol: "cooperative-sticky", Coordinator: 2,
			Members: []client.GroupMember{
				{ID: "billing-7f3c-4e21", ClientID: "billing-svc", Host: "/10.0.1.20",
					Assigned: []client.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}},
				{ID: "billing-9a1d-77b0", InstanceID: "billing-2", ClientID: "billing-svc", Host: "/10.0.1.21",
					Assigned: []client.TopicPartitions{{Topic: "orders", Partitions: []int32{2}}}},
			},
			Offsets: []client.GroupOffset{
				{Topic: "orders", Partition: 0, Committed: 39_990, End: 40_000, Lag: 10, MemberID: "billing-7f3c-4e21"},
				{Topic: "orders", Partition: 1, Committed: 39_950, End: 40_000, Lag: 50, MemberID: "billing-7f3c-4e21"},
				{Topic: "orders", Partition: 2, Committed: 40_000, End: 40_000, Lag: 0, MemberID: "billing-9a1d-77b0"},
			}, TotalLag: 60},
	}
	ts := t0.Add(-time.Minute)
	f.records["orders"] = []client.Record{
		{Topic: "orders", Partition: 0, Offset: 39_998, Timestamp: ts, Key: []byte("customer-17"),
			Value:   []byte(`{"id":"o-1001","customer":"customer-17","total":42.5,"items":[{"sku":"A-1","qty":2}]}`),
			Headers: []client.Header{{Key: "trace-id", Value: []byte("4bf92f3577b34da6")}, {Key: "source", Value: []byte("web")}}},
		{Topic: "orders", Partition: 1, Offset: 39_999, Timestamp: ts.Add(time.Second), Key: []byte("customer-3"),
			Value: []byte("plain text order note\nsecond line")},
		{Topic: "orders", Partition: 2, Offset: 39_999, Timestamp: ts.Add(2 * time.Second), Key: nil,
			Value: []byte{0x00, 0x01, 0xfe, 0xff, 0x10, 0x42}},
	}
	return f
}

// addProfiles adds a compacted topic to f, as a MoonMQ broker reports it:
// its largest dirty ratio in the listing, and per partition the log
// cleaner's state.
func addProfiles(f *fakeSource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics = append(f.topics, client.TopicInfo{Name: "profiles", Partitions: 3, Replicas: 3, Records: 9_000, Bytes: 2_097_152,
		CleanupPolicy: "compact,delete", DirtyRatio: 0.61})
	f.ends["profiles"] = map[int32]int64{0: 3_000, 1: 3_000, 2: 3_000}
	// The table's partitions as the cleaner stands with them: cleaned a
	// while ago, being cleaned now, given up on after a damaged segment.
	f.descs["profiles"] = client.TopicDescription{
		Name: "profiles", ID: "7c41d2aa",
		Partitions: []client.PartitionInfo{
			{Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, State: "online", LogStart: 0, HighWatermark: 3_000, Bytes: 699_050,
				Compaction: &client.Compaction{DirtyRatio: 0.47, DirtyBytes: 262_144, Cleanings: 12,
					LastCleaned: t0.Add(-3 * time.Minute), LastDuration: 84 * time.Millisecond}},
			{Partition: 1, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{1, 2, 3}, State: "online", LogStart: 0, HighWatermark: 3_000, Bytes: 699_051,
				Compaction: &client.Compaction{DirtyRatio: 0.61, DirtyBytes: 393_216, CompactionDelay: 90 * time.Second, Cleanings: 11,
					LastCleaned: t0.Add(-20 * time.Minute), LastDuration: 1_250 * time.Millisecond, Cleaning: true}},
			{Partition: 2, Leader: 3, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2, 3}, State: "online", LogStart: 0, HighWatermark: 3_000, Bytes: 699_051,
				Compaction: &client.Compaction{DirtyRatio: 0.55, DirtyBytes: 360_448,
					Uncleanable: "clean segment 00000000000000000420: crc mismatch"}},
		},
		Configs: []client.ConfigEntry{
			{Name: "cleanup.policy", Value: "compact,delete", Source: "topic"},
			{Name: "min.cleanable.dirty.ratio", Value: "0.5", Source: "default", Default: true},
			{Name: "retention.ms", Value: "2592000000", Source: "topic"},
			{Name: "segment.bytes", Value: "1073741824", Source: "default", Default: true},
		},
	}
}

// demoRunner starts the dashboard on the demo cluster and lets it see a few
// refreshes with traffic, so rates and sparklines have data.
func demoRunner(t *testing.T, w, h int) *runner {
	t.Helper()
	src := demoSource()
	r := newRunner(t, src, w, h)
	r.until("first snapshot", func() bool { return r.m.d.snap != nil })
	for i := 1; i <= 4; i++ {
		src.mu.Lock()
		for p := range src.ends["orders"] {
			src.ends["orders"][p] += int64(100 * i)
		}
		src.ends["payments"][0] += 7
		src.topics[2].Bytes += int64(100 * i * 300)
		d := src.groupDescs["billing"]
		d.Offsets[0].Committed += int64(90 * i)
		src.groupDescs["billing"] = d
		src.mu.Unlock()
		r.refresh()
	}
	return r
}

func TestGoldenViews(t *testing.T) {
	for _, size := range []struct{ w, h int }{{80, 24}, {120, 30}} {
		prefix := func(name string) string { return name + "-" + strconv.Itoa(size.w) + "x" + strconv.Itoa(size.h) }
		t.Run(prefix("views"), func(t *testing.T) {
			r := demoRunner(t, size.w, size.h)
			requireGolden(t, prefix("overview"), r.screen())

			r.keys("2")
			requireGolden(t, prefix("topics"), r.screen())

			r.keys("j", "j", "enter")
			r.until("topic detail", func() bool { return r.m.topic.detail != nil })
			requireGolden(t, prefix("topic-detail"), r.screen())

			r.keys("3")
			requireGolden(t, prefix("groups"), r.screen())

			r.keys("j", "enter")
			requireGolden(t, prefix("group-detail"), r.screen())

			r.keys(":")
			r.typeText("records orders")
			r.keys("enter")
			r.until("records", func() bool { return len(r.m.records.recs) == 3 })
			requireGolden(t, prefix("records"), r.screen())

			r.keys("g", "enter")
			requireGolden(t, prefix("record-detail"), r.screen())

			r.keys("esc", "?")
			requireGolden(t, prefix("help"), r.screen())
		})
	}
}

func TestGoldenStatusLines(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.src.setDown(errBrokerDown)
	r.refresh()
	r.clock.advance(9 * time.Second)
	r.tick()
	requireGolden(t, "reconnecting-80x24", r.screen())

	r = demoRunner(t, 80, 24)
	r.keys("2", "/")
	r.typeText("pay")
	requireGolden(t, "filter-prompt-80x24", r.screen())

	r.send(tea.WindowSizeMsg{Width: 39, Height: 9})
	requireGolden(t, "too-small", r.screen())
}

// A compacted topic's detail has a compaction pane between partitions and
// configs, which tab reaches; a topic that is not compacted has none.
func TestGoldenCompactedTopic(t *testing.T) {
	for _, size := range []struct{ w, h int }{{80, 24}, {120, 30}} {
		name := "topic-detail-compacted-" + strconv.Itoa(size.w) + "x" + strconv.Itoa(size.h)
		t.Run(name, func(t *testing.T) {
			r := demoRunner(t, size.w, size.h)
			addProfiles(r.src)
			r.refresh()
			if size.w == 80 {
				r.keys("2")
				requireGolden(t, "topics-compacted-80x24", r.screen())
			}
			r.keys(":")
			r.typeText("topic profiles")
			r.keys("enter")
			r.until("topic detail", func() bool { return r.m.topic.detail != nil })
			requireGolden(t, name, r.screen())

			require.Equal(t, paneParts, r.m.topic.focus)
			r.keys("tab")
			require.Equal(t, paneCompact, r.m.topic.focus)
			r.keys("tab")
			require.Equal(t, paneConfigs, r.m.topic.focus)
			r.keys("tab")
			require.Equal(t, paneParts, r.m.topic.focus)
			r.keys("shift+tab")
			require.Equal(t, paneConfigs, r.m.topic.focus)
			r.keys("shift+tab", "j", "enter")
			r.until("records of partition 1", func() bool { return r.m.records.topic == "profiles" && r.m.records.partition == 1 })
		})
	}
	r := demoRunner(t, 80, 24)
	r.keys(":")
	r.typeText("topic orders")
	r.keys("enter")
	r.until("topic detail", func() bool { return r.m.topic.detail != nil })
	require.NotContains(t, r.screen(), "Compaction")
	r.keys("tab")
	require.Equal(t, paneConfigs, r.m.topic.focus, "no compaction pane to stop at")
	r.keys("tab")
	require.Equal(t, paneParts, r.m.topic.focus)
}

// The jump and command prompts say what they take in full on an
// 80-column terminal: nothing of the hint is cut.
func TestGoldenPrompts80Columns(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys(":")
	r.typeText("records orders")
	r.keys("enter")
	r.until("records", func() bool { return len(r.m.records.recs) == 3 })
	r.keys("o")
	screen := r.screen()
	requireGolden(t, "jump-prompt-80x24", screen)
	requireStatusLine(t, screen, " jump to: "+jumpPlaceholder)

	r.keys("esc", ":")
	screen = r.screen()
	requireGolden(t, "command-prompt-80x24", screen)
	requireStatusLine(t, screen, " :"+commandPlaceholder)
}

// requireStatusLine checks that the screen's status line (the second last)
// is want, and that no line is wider than the terminal.
func requireStatusLine(t *testing.T, screen, want string) {
	t.Helper()
	lines := strings.Split(screen, "\n")
	for i, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), 80, "line %d is wider than 80 columns: %q", i, l)
	}
	require.GreaterOrEqual(t, len(lines), 2)
	require.Equal(t, want, lines[len(lines)-2])
}
