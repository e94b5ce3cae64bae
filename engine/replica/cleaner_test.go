package replica

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/clock"
)

// fakeCleaner records the pauses asked of it; busy partitions refuse
// TryPause, as a partition being cleaned does.
type fakeCleaner struct {
	mu     sync.Mutex
	events []string
	busy   map[string]bool
}

func (f *fakeCleaner) AbortAndPause(topic string, partition int32) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("abort %s-%d", topic, partition))
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, fmt.Sprintf("resume %s-%d", topic, partition))
	}
}

func (f *fakeCleaner) TryPause(topic string, partition int32) (func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy[topic] {
		f.events = append(f.events, fmt.Sprintf("busy %s-%d", topic, partition))
		return nil, false
	}
	f.events = append(f.events, fmt.Sprintf("pause %s-%d", topic, partition))
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, fmt.Sprintf("resume %s-%d", topic, partition))
	}, true
}

func (f *fakeCleaner) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.events
	f.events = nil
	return out
}

// Deletion and truncation abort and pause the partition's cleaning and
// resume it after; retention of a compact,delete topic skips a partition
// being cleaned, and does not touch the cleaner for other policies.
func TestCleanerPausedByDeleteTruncateAndRetention(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	fc := &fakeCleaner{busy: map[string]bool{}}
	// Retention runs only when the test calls it, not on the housekeeping tick.
	b, err := Open(Options{DataDir: t.TempDir(), Clock: clk, Cleaner: fc, RetentionCheckInterval: 1000 * time.Hour})
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()

	overrides := map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "1000", "segment.bytes": "1024"}
	both, err := b.EnsurePartition(TopicPartition{"both", 0}, overrides)
	require.NoError(t, err)
	plain, err := b.EnsurePartition(TopicPartition{"plain", 0}, map[string]string{"retention.ms": "1000", "segment.bytes": "1024"})
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		for _, p := range []*Partition{both, plain} {
			res, err := p.Append(keyedBatch(fmt.Sprint(i), string(make([]byte, 200))))
			require.NoError(t, err)
			require.NoError(t, p.WaitDurable(ctx, res))
		}
	}
	clk.Advance(time.Hour)
	fc.busy["both"] = true
	b.EnforceRetention()
	require.Equal(t, []string{"busy both-0"}, fc.take(), "only the compact,delete topic asks the cleaner")
	require.Zero(t, both.log.LogStartOffset(), "skipped while being cleaned")
	require.Positive(t, plain.log.LogStartOffset())

	fc.busy["both"] = false
	b.EnforceRetention()
	require.Equal(t, []string{"pause both-0", "resume both-0"}, fc.take())
	require.Positive(t, both.log.LogStartOffset(), "retention ran: compact,delete deletes old segments")

	// Truncation (a follower's) aborts and pauses around it.
	require.NoError(t, both.BecomeFollower(1, 2))
	require.NoError(t, both.TruncateTo(both.log.LogEndOffset()-1))
	require.Equal(t, []string{"abort both-0", "resume both-0"}, fc.take())
	require.NoError(t, both.TruncateFullyAndStartAt(100))
	require.Equal(t, []string{"abort both-0", "resume both-0"}, fc.take())

	require.NoError(t, b.DeleteTopic("both"))
	require.Equal(t, []string{"abort both-0", "resume both-0"}, fc.take())
}

// CleanerView and FirstBatchTimestamp give the cleaner the partition's
// bounds and the timestamps max.compaction.lag.ms needs.
func TestCleanerView(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	b, err := Open(Options{DataDir: t.TempDir(), Clock: clk})
	require.NoError(t, err)
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{"v", 0}, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.2"})
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		res, err := p.Append(keyedBatch(fmt.Sprint(i), string(make([]byte, 300))))
		require.NoError(t, err)
		require.NoError(t, p.WaitDurable(context.Background(), res))
	}
	v := p.CleanerView()
	require.True(t, v.Config.CleanupCompact)
	require.Equal(t, 0.2, v.Config.MinCleanableDirtyRatio)
	require.Equal(t, int64(10), v.HighWatermark)
	require.Equal(t, int64(10), v.LastStable)
	require.Zero(t, v.LogStart)
	bases := p.log.SegmentBases()
	require.Greater(t, len(bases), 1, "rolled")
	require.Equal(t, bases[len(bases)-1], v.ActiveBase)

	ts, ok := p.FirstBatchTimestamp(3, 10)
	require.True(t, ok)
	require.Equal(t, int64(1000), ts, "keyedBatch's timestamp")
	_, ok = p.FirstBatchTimestamp(3, 3)
	require.False(t, ok, "nothing starts below 3 at or after 3")
	_, ok = p.FirstBatchTimestamp(10, 20)
	require.False(t, ok, "past the end")
}
