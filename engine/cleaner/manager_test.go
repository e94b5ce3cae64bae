package cleaner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/log"
	"github.com/moonmq/moonmq/engine/topicconfig"
)

// fakeLog is a Log whose dirty ratio the test sets and whose Clean records
// its options; with block set, Clean signals started and waits for release
// or its context.
type fakeLog struct {
	mu        sync.Mutex
	ratio     float64
	cleanable int64
	asked     []int64 // DirtyRatio's firstUncleanable arguments
	cleans    []CleanOptions
	err       error
	stats     CleanStats
	block     bool
	started   chan struct{}
	release   chan struct{}
	ctxErrs   []error
}

func newFakeLog(ratio float64, cleanable int64) *fakeLog {
	return &fakeLog{ratio: ratio, cleanable: cleanable, started: make(chan struct{}, 16), release: make(chan struct{}),
		stats: CleanStats{SegmentsCleaned: 1}}
}

func (f *fakeLog) DirtyRatio(fu int64) (float64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, fu)
	return f.ratio, f.cleanable
}

func (f *fakeLog) Clean(ctx context.Context, o CleanOptions) (CleanStats, error) {
	f.mu.Lock()
	f.cleans = append(f.cleans, o)
	block, err, stats := f.block, f.err, f.stats
	f.mu.Unlock()
	if block {
		f.started <- struct{}{}
		select {
		case <-ctx.Done():
			f.mu.Lock()
			f.ctxErrs = append(f.ctxErrs, ctx.Err())
			f.mu.Unlock()
			return CleanStats{}, ctx.Err()
		case <-f.release:
		}
	}
	if err != nil {
		return CleanStats{}, err
	}
	// A cleaning leaves the log clean.
	f.mu.Lock()
	f.ratio = 0
	f.mu.Unlock()
	return stats, nil
}

func (f *fakeLog) cleaned() []CleanOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]CleanOptions(nil), f.cleans...)
}

func (f *fakeLog) set(fn func(*fakeLog)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// source is a Source the test edits.
type source struct {
	mu      sync.Mutex
	targets []Target
}

func (s *source) list() []Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Target(nil), s.targets...)
}

func (s *source) remove(topic string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.targets[:0]
	for _, t := range s.targets {
		if t.Topic != topic {
			out = append(out, t)
		}
	}
	s.targets = out
}

func compacted(t *testing.T, overrides map[string]string) topicconfig.Config {
	t.Helper()
	o := map[string]string{"cleanup.policy": "compact"}
	for k, v := range overrides {
		o[k] = v
	}
	c, err := topicconfig.Resolve(o)
	require.NoError(t, err)
	return c
}

func target(topic string, cfg topicconfig.Config, l Log) Target {
	return Target{TopicPartition: TopicPartition{topic, 0}, Config: cfg, HighWatermark: 1000, LastStable: 1000, ActiveBase: 1000, Log: l}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newManager(t *testing.T, clk clock.Clock, threads int) *Manager {
	t.Helper()
	m, err := New(Options{Threads: threads, Clock: clk, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// One pass cleans the dirtiest eligible compacted partition with the
// options its topic and the manager give, and nothing else.
func TestCleanOncePicksAndPassesOptions(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(now)
	m := newManager(t, clk, 2)
	ctx := context.Background()

	dirty, dirtier, below, deleteOnly := newFakeLog(0.6, 1000), newFakeLog(0.9, 1000), newFakeLog(0.3, 1000), newFakeLog(0.99, 1000)
	cfg := compacted(t, map[string]string{"delete.retention.ms": "5000", "min.compaction.lag.ms": "7000"})
	del, err := topicconfig.Resolve(nil)
	require.NoError(t, err)
	src := &source{targets: []Target{
		target("dirty", cfg, dirty),
		{TopicPartition: TopicPartition{"dirtier", 3}, Config: cfg, HighWatermark: 900, LastStable: 800, ActiveBase: 850, Log: dirtier},
		target("below", cfg, below),
		target("delete-only", del, deleteOnly),
	}}

	require.True(t, m.CleanOnce(ctx, src.list))
	require.Len(t, dirtier.cleaned(), 1)
	require.Equal(t, CleanOptions{
		Now: now, DeleteRetention: 5 * time.Second, MinCompactionLag: 7 * time.Second,
		FirstUncleanable: 800, // min(HW 900, LSO 800, active 850)
		MapMemory:        DefaultDedupeBufferSize / 2,
	}, withoutLimit(dirtier.cleaned()[0]))
	require.NotNil(t, dirtier.cleaned()[0].IOLimit)
	require.NotNil(t, dirtier.cleaned()[0].Yield, "a cleaning gives the processor away now and then")
	require.Equal(t, []int64{800}, dirtier.asked, "the ratio is asked at the first uncleanable offset")
	require.Empty(t, dirty.cleaned())

	require.True(t, m.CleanOnce(ctx, src.list), "next the other dirty one")
	require.Len(t, dirty.cleaned(), 1)
	require.False(t, m.CleanOnce(ctx, src.list), "the rest is below its ratio or not compacted")
	require.Empty(t, below.cleaned())
	require.Empty(t, deleteOnly.cleaned())
	require.Empty(t, deleteOnly.asked, "a delete-only topic is not even evaluated")

	// The policy is read at each pass: compacting the topic makes it a
	// candidate (changeable at run time).
	src.mu.Lock()
	src.targets[3].Config = compacted(t, nil)
	src.mu.Unlock()
	require.True(t, m.CleanOnce(ctx, src.list))
	require.Len(t, deleteOnly.cleaned(), 1)

	st := m.Stats()
	require.Equal(t, int64(3), st.Cleanings)
	ps := m.PartitionStats()
	require.Len(t, ps, 4)
	require.Equal(t, "below", ps[0].Topic)
	require.InDelta(t, 0.3, ps[0].DirtyRatio, 1e-9)
	require.Equal(t, int64(1000), ps[0].DirtyBytes)
	require.Zero(t, ps[0].Cleanings)
	require.Equal(t, "dirtier", ps[2].Topic)
	require.Equal(t, int64(1), ps[2].Cleanings)
	require.Equal(t, now, ps[2].LastCleaned)
}

// withoutLimit drops the hooks (functions do not compare).
func withoutLimit(o CleanOptions) CleanOptions { o.IOLimit, o.Yield = nil, nil; return o }

// Statistics of a cleaning add up per partition and for the cleaner.
func TestCleanStatsAccumulate(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	l := newFakeLog(0.8, 1000)
	l.stats = CleanStats{BytesRead: 1000, BytesWritten: 400, RecordsRemoved: 30, Passes: 2, Duration: 3 * time.Second}
	src := &source{targets: []Target{target("t", compacted(t, nil), l)}}
	require.True(t, m.CleanOnce(context.Background(), src.list))
	l.set(func(f *fakeLog) { f.ratio = 0.7 })
	require.True(t, m.CleanOnce(context.Background(), src.list))
	st := m.Stats()
	require.Equal(t, Stats{Threads: 1, Cleanings: 2, Passes: 4, BytesRead: 2000, BytesWritten: 800, RecordsRemoved: 60,
		TimeSpent: 6 * time.Second, LastRun: clk.Now(), MaxDirtyRatio: 0.7}, st)
	ps := m.PartitionStats()[0]
	require.Equal(t, int64(2), ps.Cleanings)
	require.Equal(t, int64(2000), ps.BytesRead)
	require.Equal(t, 3*time.Second, ps.LastDuration)
}

// max.compaction.lag.ms forces a cleaning below the ratio once the oldest
// dirty batch is older than it; the dirty part starts where the last
// cleaning ended.
func TestMaxCompactionLagForcesCleaning(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(start)
	m := newManager(t, clk, 1)
	l := newFakeLog(0.1, 1000)
	var froms []int64
	// Batches are one per offset, stamped start + offset seconds.
	tsAt := func(from, below int64) (int64, bool) {
		froms = append(froms, from)
		if from >= below {
			return 0, false
		}
		return start.Add(time.Duration(from) * time.Second).UnixMilli(), true
	}
	tg := target("t", compacted(t, map[string]string{"max.compaction.lag.ms": "60000"}), l)
	tg.FirstBatchTimestamp = tsAt
	tg.HighWatermark, tg.LastStable, tg.ActiveBase = 100, 100, 100
	src := &source{targets: []Target{tg}}
	ctx := context.Background()

	require.False(t, m.CleanOnce(ctx, src.list), "within the lag")
	require.Equal(t, []int64{0}, froms, "nothing cleaned yet: from the log start")
	clk.Advance(61 * time.Second)
	require.True(t, m.CleanOnce(ctx, src.list), "the batch at offset 0 waited past the lag")
	require.Equal(t, time.Second, m.PartitionStats()[0].CompactionDelay)

	// More was appended: the dirty part now starts at 100, stamped +100 s.
	l.set(func(f *fakeLog) { f.ratio = 0.1 })
	src.mu.Lock()
	src.targets[0].HighWatermark, src.targets[0].LastStable, src.targets[0].ActiveBase = 200, 200, 200
	src.mu.Unlock()
	require.False(t, m.CleanOnce(ctx, src.list))
	require.Equal(t, int64(100), froms[len(froms)-1])
	clk.Advance(100 * time.Second)
	require.True(t, m.CleanOnce(ctx, src.list))
	require.Len(t, l.cleaned(), 2)
}

// The threads clean in the background when woken, an abort cancels a
// running cleaning and waits for it, a paused partition is not cleaned,
// resume makes it eligible again, and Close stops the threads.
func TestManagerThreadsAbortPauseClose(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	l := newFakeLog(0.9, 1000)
	l.block = true
	src := &source{targets: []Target{target("t", compacted(t, nil), l)}}
	require.NoError(t, m.Start(src.list))
	require.Error(t, m.Start(src.list), "once")

	<-l.started // the thread's first pass found it dirty
	resume := m.AbortAndPause("t", 0)
	l.mu.Lock()
	require.Equal(t, []error{context.Canceled}, l.ctxErrs, "AbortAndPause returned after the cleaning stopped")
	l.mu.Unlock()
	require.Equal(t, int64(1), m.Stats().Aborted)
	require.True(t, m.PartitionStats()[0].Paused)

	// Paused: passes (woken or timed) do not clean it. The thread's passes
	// are counted by its DirtyRatio calls: once a second one has begun, the
	// first is over, and would have cleaned by then.
	require.False(t, m.CleanOnce(context.Background(), src.list))
	asked := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.asked)
	}
	before := asked()
	m.Wake()
	require.Eventually(t, func() bool { return asked() > before }, 10*time.Second, time.Millisecond, "the woken thread looked")
	clk.Advance(DefaultBackoff)
	m.Wake()
	require.Eventually(t, func() bool { return asked() > before+1 }, 10*time.Second, time.Millisecond,
		"a paused partition was cleaned: the thread's next pass never came")
	select {
	case <-l.started:
		t.Fatal("a paused partition was cleaned")
	default:
	}

	// Resumed: the thread, woken by the resume, cleans it again.
	resume()
	resume() // idempotent
	<-l.started
	l.release <- struct{}{}
	require.Eventually(t, func() bool { return m.Stats().Cleanings == 1 }, 10*time.Second, time.Millisecond)
	require.False(t, m.PartitionStats()[0].Paused)

	// Close cancels a running cleaning and waits for the thread.
	l.set(func(f *fakeLog) { f.ratio = 0.9 })
	m.Wake()
	<-l.started
	require.NoError(t, m.Close())
	l.mu.Lock()
	require.Len(t, l.ctxErrs, 2)
	l.mu.Unlock()
	require.ErrorIs(t, m.Start(src.list), ErrClosed)
}

// A deleted partition: its cleaning is aborted, and once it leaves the
// Source its state is forgotten; a re-created one starts afresh.
func TestDeletedPartitionAbortsAndIsForgotten(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	l := newFakeLog(0.9, 1000)
	l.block = true
	src := &source{targets: []Target{target("gone", compacted(t, nil), l), target("stays", compacted(t, nil), newFakeLog(0, 0))}}
	require.NoError(t, m.Start(src.list))
	<-l.started
	resume := m.AbortAndPause("gone", 0)
	src.remove("gone")
	resume()
	require.Eventually(t, func() bool { return len(m.PartitionStats()) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, "stays", m.PartitionStats()[0].Topic)
	m.mu.Lock()
	require.Len(t, m.parts, 1, "no state kept for the deleted partition")
	m.mu.Unlock()
}

// TryPause (retention of a compact,delete topic) skips a partition being
// cleaned instead of aborting it.
func TestTryPause(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	l := newFakeLog(0.9, 1000)
	l.block = true
	src := &source{targets: []Target{target("t", compacted(t, nil), l)}}
	require.NoError(t, m.Start(src.list))
	<-l.started
	_, ok := m.TryPause("t", 0)
	require.False(t, ok, "being cleaned")
	l.release <- struct{}{}
	require.Eventually(t, func() bool { return m.Stats().Cleanings == 1 }, 10*time.Second, time.Millisecond)
	resume, ok := m.TryPause("t", 0)
	require.True(t, ok)
	l.set(func(f *fakeLog) { f.ratio = 0.9 })
	require.False(t, m.CleanOnce(context.Background(), src.list), "paused")
	resume()
	l.set(func(f *fakeLog) { f.block = false })
	require.True(t, m.CleanOnce(context.Background(), src.list))
	require.Zero(t, m.Stats().Aborted)
}

// A failed cleaning marks the partition uncleanable (Kafka's
// markPartitionUncleanable): it is not retried until it is truncated.
// A closed log (deleted under the cleaner) is an abort, not a failure.
func TestFailedCleaningMarksUncleanable(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	l := newFakeLog(0.9, 1000)
	l.err = errors.New("disk on fire")
	closed := newFakeLog(0.8, 1000)
	closed.err = log.ErrClosed
	src := &source{targets: []Target{target("t", compacted(t, nil), l), target("closed", compacted(t, nil), closed)}}
	ctx := context.Background()
	require.False(t, m.CleanOnce(ctx, src.list))
	require.Equal(t, "disk on fire", m.PartitionStats()[1].Uncleanable)
	require.Equal(t, int64(1), m.Stats().Failed)
	require.False(t, m.CleanOnce(ctx, src.list), "the closed one: an abort")
	require.Equal(t, int64(1), m.Stats().Aborted)
	require.Equal(t, int64(1), m.Stats().Failed)
	require.Equal(t, 1, m.Stats().Uncleanable)
	require.Len(t, l.cleaned(), 1)

	require.False(t, m.CleanOnce(ctx, src.list), "closed is tried again")
	require.Len(t, l.cleaned(), 1, "not retried")
	require.Len(t, closed.cleaned(), 2)

	// An offline log (log.ErrFailed) is a failure, but not a reason to
	// give up on the partition: it is cleaned again once healed.
	offline := newFakeLog(0.95, 1000)
	offline.err = fmt.Errorf("write: %w", log.ErrFailed)
	src.targets = append(src.targets, target("offline", compacted(t, nil), offline))
	require.False(t, m.CleanOnce(ctx, src.list))
	require.Equal(t, int64(2), m.Stats().Failed)
	require.Equal(t, 1, m.Stats().Uncleanable, "only the first")
	offline.set(func(f *fakeLog) { f.err = nil })
	require.True(t, m.CleanOnce(ctx, src.list), "healed")
	require.Len(t, offline.cleaned(), 2)

	// Truncation (abort, pause, resume) gives it another chance.
	m.AbortAndPause("t", 0)()
	l.set(func(f *fakeLog) { f.err = nil })
	closed.set(func(f *fakeLog) { f.ratio = 0 })
	require.True(t, m.CleanOnce(ctx, src.list))
	require.Len(t, l.cleaned(), 2)
	require.Empty(t, m.PartitionStats()[2].Uncleanable)
}

func TestOptions(t *testing.T) {
	m, err := New(Options{Threads: 4, Logger: quiet})
	require.NoError(t, err)
	require.Equal(t, 32<<20, m.MapMemory(), "the dedupe buffer is shared between the threads")
	m, err = New(Options{Threads: 1, DedupeBufferSize: 8 << 30, Logger: quiet})
	require.NoError(t, err)
	require.Equal(t, math.MaxInt32, m.MapMemory(), "at most 2 GiB a thread, as Kafka")
	m, err = New(Options{Threads: 0, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, m.Start(func() []Target { t.Fatal("no threads, no passes"); return nil }))
	require.NoError(t, m.Close())

	for _, bad := range []Options{
		{Threads: -1},
		{Threads: 65},
		{Threads: 1, DedupeBufferSize: -1},
		{Threads: 4, DedupeBufferSize: 100 << 10},
		{Threads: 1, IOMaxBytesPerSecond: -5},
		{Threads: 1, IOMaxBytesPerSecond: math.NaN()},
		{Threads: 1, IOMaxBytesPerSecond: 1e-300},
	} {
		_, err := New(bad)
		require.Error(t, err, "%+v", bad)
	}
}

// checkpointLog is a fakeLog that persists its cleaner checkpoint, as
// engine/log's CleanedTo does: the dirty part starts there, even after a
// restart of the manager.
type checkpointLog struct {
	*fakeLog
	at int64
}

func (c checkpointLog) CleanedTo() (int64, error) { return c.at, nil }

func TestDirtyPartStartsAtTheLogsCheckpoint(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	clk := clock.NewFake(start)
	m := newManager(t, clk, 1)
	var froms []int64
	tg := target("t", compacted(t, map[string]string{"max.compaction.lag.ms": "1000"}), checkpointLog{newFakeLog(0.1, 10), 42})
	tg.LogStart = 7
	tg.FirstBatchTimestamp = func(from, below int64) (int64, bool) {
		froms = append(froms, from)
		return start.UnixMilli(), true
	}
	src := &source{targets: []Target{tg}}
	require.False(t, m.CleanOnce(context.Background(), src.list))
	clk.Advance(2 * time.Second)
	require.True(t, m.CleanOnce(context.Background(), src.list))
	require.Equal(t, []int64{42, 42}, froms)
}

// A cleaning that ends well without progress (what is dirty is younger
// than min.compaction.lag.ms, or not flushed yet) is not repeated in a
// loop: the partition waits a backoff, and the others are cleaned meanwhile.
func TestNoProgressBacksOff(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	stuck, other := newFakeLog(0.9, 1000), newFakeLog(0.6, 1000)
	stuck.stats = CleanStats{BytesRead: 100}
	src := &source{targets: []Target{target("stuck", compacted(t, nil), stuck), target("other", compacted(t, nil), other)}}
	ctx := context.Background()
	stuck.set(func(f *fakeLog) { f.block = false })
	require.False(t, m.CleanOnce(ctx, src.list), "cleaned, but no progress")
	stuck.set(func(f *fakeLog) { f.ratio = 0.9 }) // still as dirty
	require.True(t, m.CleanOnce(ctx, src.list), "the other one, meanwhile")
	require.Len(t, other.cleaned(), 1)
	require.False(t, m.CleanOnce(ctx, src.list), "nothing else to do before the backoff")
	require.Len(t, stuck.cleaned(), 1)
	clk.Advance(DefaultBackoff)
	require.False(t, m.CleanOnce(ctx, src.list))
	require.Len(t, stuck.cleaned(), 2, "tried again after the backoff")
	require.Equal(t, int64(3), m.Stats().Cleanings)

	// A moved checkpoint is progress.
	stuck.set(func(f *fakeLog) { f.ratio, f.stats = 0.9, CleanStats{CleanedTo: 50} })
	clk.Advance(DefaultBackoff)
	require.True(t, m.CleanOnce(ctx, src.list))
}

// A compacted partition the threads have not looked at yet (a topic
// created a moment ago, the threads asleep) is evaluated when its state is
// asked for, so DescribeLogDirs and /stats report it at once; asking
// cleans nothing.
func TestPartitionStatsLooksAtNewPartitions(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	m := newManager(t, clk, 1)
	src := &source{}
	passes := make(chan struct{}, 16)
	require.NoError(t, m.Start(func() []Target {
		defer func() { passes <- struct{}{} }()
		return src.list()
	}))
	<-passes // the thread's first pass saw no partition; it now sleeps for its backoff

	l := newFakeLog(0.75, 3000)
	src.mu.Lock()
	src.targets = []Target{target("fresh", compacted(t, nil), l)}
	src.mu.Unlock()
	ps := m.PartitionStats()
	require.Len(t, ps, 1)
	require.Equal(t, TopicPartition{"fresh", 0}, ps[0].TopicPartition)
	require.Equal(t, 0.75, ps[0].DirtyRatio)
	require.Equal(t, int64(3000), ps[0].DirtyBytes)
	require.Equal(t, int64(1000), ps[0].FirstUncleanable)
	require.Empty(t, l.cleaned(), "asking cleans nothing")
	require.Zero(t, m.Stats().Cleanings)
}
