package log

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
)

func TestRetentionBySize(t *testing.T) {
	opts := testOptions(nil)
	l := openLog(t, t.TempDir(), opts)
	want := fillLog(t, l, 100, 0)
	segs := l.SegmentCount()
	require.Greater(t, segs, 4)

	opts.RetentionBytes = 3 * opts.SegmentBytes
	require.NoError(t, l.SetOptions(opts))
	n, err := l.EnforceRetention()
	require.NoError(t, err)
	require.Positive(t, n)
	require.Equal(t, segs-n, l.SegmentCount())
	require.GreaterOrEqual(t, l.Size(), opts.RetentionBytes, "never below the retention size")
	require.Less(t, l.Size(), opts.RetentionBytes+opts.SegmentBytes+1)

	start := l.LogStartOffset()
	require.Positive(t, start)
	_, err = l.Read(start-1, 1, l.HighWatermark())
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	var kept []stored
	for _, s := range want {
		if s.base >= start {
			kept = append(kept, s)
		}
	}
	requireSameBatches(t, kept, readAll(t, l, start, 1<<20))

	// Never the active segment, even with a zero-ish limit.
	opts.RetentionBytes = 1
	require.NoError(t, l.SetOptions(opts))
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Equal(t, 1, l.SegmentCount())
	require.Equal(t, l.active.base, l.LogStartOffset())
}

func TestRetentionByTime(t *testing.T) {
	clock := newFakeClock()
	opts := testOptions(clock)
	opts.Retention = time.Hour
	l := openLog(t, t.TempDir(), opts)
	nowMs := clock.Now().UnixMilli()
	// Old batches (timestamps two hours ago), then fresh ones.
	var old, fresh []stored
	for i := 0; i < 40; i++ {
		old = append(old, appendBatch(t, l, makeBatch(2, 200, nowMs-2*3600_000, i), 0))
	}
	// Force a segment boundary between old and fresh data.
	require.NoError(t, l.rollForTest())
	for i := 0; i < 40; i++ {
		fresh = append(fresh, appendBatch(t, l, makeBatch(2, 200, nowMs, 100+i), 0))
	}
	require.NoError(t, l.Sync())
	n, err := l.EnforceRetention()
	require.NoError(t, err)
	require.Positive(t, n)
	require.Equal(t, fresh[0].base, l.LogStartOffset(), "exactly the old segments are gone")
	requireSameBatches(t, fresh, readAll(t, l, l.LogStartOffset(), 1<<20))

	// Time passes: everything sealed expires, the active segment stays.
	clock.Advance(3 * time.Hour)
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Equal(t, 1, l.SegmentCount())
	require.Equal(t, l.active.base, l.LogStartOffset())
}

func TestSegmentAgeRoll(t *testing.T) {
	clock := newFakeClock()
	opts := testOptions(clock)
	opts.SegmentBytes = 1 << 20
	opts.SegmentAge = time.Minute
	l := openLog(t, t.TempDir(), opts)
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	n, err := l.EnforceRetention()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 1, l.SegmentCount())

	clock.Advance(2 * time.Minute)
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Equal(t, 2, l.SegmentCount(), "old non-empty active segment rolled")
	_, err = l.EnforceRetention()
	require.NoError(t, err)
	require.Equal(t, 2, l.SegmentCount(), "an empty active segment is not rolled")

	// An append to an aged segment rolls too.
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	clock.Advance(2 * time.Minute)
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	require.Equal(t, 3, l.SegmentCount())
}

// segment.jitter.ms: a segment rolls its own share of the jitter before
// SegmentAge, never after it, and the share of a jitter above SegmentAge is
// taken of SegmentAge.
func TestSegmentJitterRollsEarly(t *testing.T) {
	clock := newFakeClock()
	opts := testOptions(clock)
	opts.SegmentBytes = 1 << 20
	opts.SegmentAge = time.Hour
	opts.SegmentJitter = 30 * time.Minute
	l := openLog(t, t.TempDir(), opts)
	for round := 0; round < 3; round++ {
		appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
		l.appendMu.Lock()
		act := l.active
		act.jitterFrac = []float64{0.5, 0, 0.999}[round] // the draw, fixed for the test
		jitter := time.Duration(act.jitterFrac * float64(opts.SegmentJitter))
		l.appendMu.Unlock()
		segs := l.SegmentCount()

		clock.Advance(opts.SegmentAge - jitter - time.Millisecond)
		_, err := l.EnforceRetention()
		require.NoError(t, err)
		require.Equal(t, segs, l.SegmentCount(), "round %d: rolled before its jittered age", round)
		clock.Advance(time.Millisecond)
		_, err = l.EnforceRetention()
		require.NoError(t, err)
		require.Equal(t, segs+1, l.SegmentCount(), "round %d: not rolled at SegmentAge-%v", round, jitter)
	}

	// A jitter larger than the age is bounded by it, as Kafka bounds it.
	opts.SegmentJitter = 10 * time.Hour
	require.NoError(t, l.SetOptions(opts))
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	l.appendMu.Lock()
	l.active.jitterFrac = 0.75
	l.appendMu.Unlock()
	segs := l.SegmentCount()
	clock.Advance(opts.SegmentAge / 4)
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	require.Equal(t, segs+1, l.SegmentCount(), "rolled at a quarter of SegmentAge (jitter 3/4 of SegmentAge)")

	// New segments draw their own share.
	fracs := map[float64]bool{}
	for i := 0; i < 5; i++ {
		fracs[newSegment(l.st, int64(i)).jitterFrac] = true
	}
	require.Greater(t, len(fracs), 1)
}

// segment.index.bytes: the log rolls once the active segment's offset index
// (8 bytes an entry) or time index (12 bytes an entry) is full.
func TestIndexBytesRollsFullSegment(t *testing.T) {
	opts := testOptions(nil)
	opts.SegmentBytes = 1 << 20
	opts.IndexIntervalBytes = 1 // an index entry for every batch
	opts.MaxIndexBytes = 3 * 12 // 4 offset entries, 3 time entries
	l := openLog(t, t.TempDir(), opts)
	for i := 0; i < 9; i++ {
		appendBatch(t, l, makeBatch(1, 10, int64(i), i), 0) // rising timestamps: a time entry each
	}
	require.Equal(t, 3, l.SegmentCount(), "three batches per segment: the time index holds three entries")
	l.appendMu.Lock()
	require.LessOrEqual(t, l.active.timeIdx.count(), 3)
	l.appendMu.Unlock()

	// Kafka's minimum, 4 bytes, holds no entry at all: every batch gets a
	// segment of its own.
	opts.MaxIndexBytes = 4
	require.NoError(t, l.SetOptions(opts))
	before := l.SegmentCount()
	for i := 0; i < 3; i++ {
		appendBatch(t, l, makeBatch(1, 10, 100, i), 0)
	}
	require.Equal(t, before+3, l.SegmentCount())
}

func TestRetentionKeepsDataAboveHighWatermark(t *testing.T) {
	opts := testOptions(nil)
	opts.RetentionBytes = 1
	l := openLog(t, t.TempDir(), opts)
	l.syncMu.Lock() // nothing becomes durable, so the high watermark stays 0
	for i := 0; i < 50; i++ {
		appendBatch(t, l, makeBatch(2, 200, 0, i), 0)
	}
	n, err := l.EnforceRetention()
	require.NoError(t, err)
	require.Zero(t, n)
	l.syncMu.Unlock()
}

func TestDeleteRecordsBeforePersists(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	want := fillLog(t, l, 100, 0)
	segs := l.SegmentCount()
	mid := want[50].base + 1 // inside a batch

	start, err := l.DeleteRecordsBefore(mid)
	require.NoError(t, err)
	require.Equal(t, mid, start)
	require.Equal(t, mid, l.LogStartOffset())
	require.Less(t, l.SegmentCount(), segs)
	_, err = l.Read(mid-1, 1, l.HighWatermark())
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	data, err := l.Read(mid, 1, l.HighWatermark())
	require.NoError(t, err)
	require.Equal(t, want[50].bytes, data, "whole batch containing the start")

	start, err = l.DeleteRecordsBefore(10)
	require.NoError(t, err)
	require.Equal(t, mid, start, "never moves backwards")
	_, err = l.DeleteRecordsBefore(l.LogEndOffset() + 1)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	res, err := l.Append([][]byte{makeBatch(1, 1, 0, 0)}, 1)
	require.NoError(t, err)
	require.Equal(t, mid, res.LogStartOffset)

	l.crash()
	l2 := openLog(t, dir, testOptions(nil))
	require.Equal(t, mid, l2.LogStartOffset())
	_, err = l2.Read(mid-1, 1, l2.HighWatermark())
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	// Up to the log end: everything readable is gone, the log still works.
	end := l2.LogEndOffset()
	_, err = l2.DeleteRecordsBefore(end)
	require.NoError(t, err)
	require.NoError(t, l2.Close())
	l3 := openLog(t, dir, testOptions(nil))
	require.Equal(t, end, l3.LogStartOffset())
	require.Equal(t, end, l3.LogEndOffset())
	data, err = l3.Read(end, 100, l3.HighWatermark())
	require.NoError(t, err)
	require.Empty(t, data)
}

// TestReadsDuringRetention races readers against retention deleting the
// segments they read: a read either returns valid batches or reports the
// offset out of range, never anything else.
func TestReadsDuringRetention(t *testing.T) {
	opts := testOptions(nil)
	opts.SegmentBytes = 2048
	l := openLog(t, t.TempDir(), opts)
	fillLog(t, l, 200, 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var reads atomic.Int64
	errc := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(0); ctx.Err() == nil; off = (off + 7) % l.LogEndOffset() {
				data, err := l.Read(off, 4096, l.HighWatermark())
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue
				}
				if err == nil {
					err = batch.Iterate(data, func(h batch.Header, raw []byte) bool {
						_, verr := batch.ValidateStored(raw)
						if verr != nil {
							err = verr
						}
						return verr == nil
					})
				}
				if err != nil {
					errc <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for bytes := int64(200 * 300); bytes > 0; bytes -= 4096 {
		waitFor(t, "reads", func() bool { return reads.Load() > 0 })
		opts.RetentionBytes = bytes
		require.NoError(t, l.SetOptions(opts))
		_, err := l.EnforceRetention()
		require.NoError(t, err)
	}
	cancel()
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
}

// rollForTest forces a segment roll.
func (l *Log) rollForTest() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	return l.roll(l.leo.Load())
}

// A sealed segment deleted (DeleteRecords, retention) before the flusher
// got to fsync it is skipped, not a failure that takes the log offline.
func TestDeletedSegmentAwaitingFsyncIsNotAFailure(t *testing.T) {
	clk := newFakeClock()
	opts := testOptions(clk)
	opts.FlushAlways = false
	opts.FlushInterval = time.Hour // the fake clock never gets there: only Sync flushes
	l := openLog(t, t.TempDir(), opts)
	for l.SegmentCount() < 4 {
		_, err := l.Append([][]byte{makeBatch(4, 200, 0, 0)}, 0)
		require.NoError(t, err)
	}
	_, err := l.DeleteRecordsBefore(l.HighWatermark())
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Failure())
	_, err = l.Append([][]byte{makeBatch(1, 10, 0, 0)}, 0)
	require.NoError(t, err)
	require.NoError(t, l.Sync())
}
