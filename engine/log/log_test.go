package log

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
)

func TestOptions(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	require.Equal(t, int64(DefaultSegmentBytes), o.SegmentBytes)
	require.Equal(t, DefaultRetention, o.Retention)
	require.Equal(t, int64(-1), o.RetentionBytes)

	for _, bad := range []func(*Options){
		func(o *Options) { o.SegmentBytes = 10 },
		func(o *Options) { o.SegmentBytes = 1 << 40 },
		func(o *Options) { o.SegmentAge = -1 },
		func(o *Options) { o.IndexIntervalBytes = -1 },
		func(o *Options) { o.MaxMessageBytes = -1 },
		func(o *Options) { o.FlushInterval = -time.Second },
	} {
		o := Options{}
		o.EnsureDefaults()
		bad(&o)
		require.ErrorIs(t, o.Validate(), ErrInvalidOptions)
	}
	_, err := Open(t.TempDir(), Options{SegmentBytes: 3})
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestAppendReadRoundTripAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	rng := rand.New(rand.NewPCG(1, 2))
	var want []stored
	next := int64(0)
	for i := 0; i < 300; i++ {
		n := 1 + rng.IntN(5)
		s := appendBatch(t, l, makeBatch(n, rng.IntN(300), int64(1000+i*10), i), 3)
		require.Equal(t, next, s.base)
		require.Equal(t, next+int64(n)-1, s.last)
		next = s.last + 1
		want = append(want, s)
	}
	require.Equal(t, next, l.LogEndOffset())
	require.Greater(t, l.SegmentCount(), 5, "small segments must roll")
	require.NoError(t, l.WaitDurable(context.Background(), next-1))
	require.Equal(t, next, l.HighWatermark())

	// Stored bytes are the appended bytes with offset and epoch patched.
	for _, s := range want {
		h, err := batch.Validate(s.bytes, 0)
		require.NoError(t, err)
		require.Equal(t, s.base, h.BaseOffset)
		require.Equal(t, int32(3), h.PartitionLeaderEpoch)
	}
	requireSameBatches(t, want, readAll(t, l, 0, 1<<20))
	requireSameBatches(t, want, readAll(t, l, 0, 1)) // one batch per read

	// Every offset reads from the batch containing it.
	for _, s := range want {
		for off := s.base; off <= s.last; off++ {
			data, err := l.Read(off, 1, l.HighWatermark())
			require.NoError(t, err)
			require.Equal(t, s.bytes, data, "offset %d", off)
		}
	}

	// Reopen (clean) and read the same.
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, testOptions(nil))
	require.Equal(t, next, l2.LogEndOffset())
	requireSameBatches(t, want, readAll(t, l2, 0, 1<<20))
	s := appendBatch(t, l2, makeBatch(2, 10, 5000, 1), 3)
	require.Equal(t, next, s.base)
}

func TestReadLimits(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	var bs []stored
	for i := 0; i < 6; i++ {
		bs = append(bs, appendBatch(t, l, makeBatch(2, 100, int64(i), i), 0))
	}
	require.NoError(t, l.Sync())
	size := len(bs[0].bytes)
	hw := l.HighWatermark()

	// The first batch is whole even if larger than maxBytes.
	data, err := l.Read(0, 10, hw)
	require.NoError(t, err)
	require.Equal(t, bs[0].bytes, data)
	data, err = l.Read(0, 0, hw)
	require.NoError(t, err)
	require.Equal(t, bs[0].bytes, data)

	// maxBytes cuts at a batch boundary.
	data, err = l.Read(0, 3*size+size/2, hw)
	require.NoError(t, err)
	require.Len(t, data, 3*size)

	// maxOffset: never a batch whose base is >= maxOffset.
	data, err = l.Read(0, 1<<20, bs[2].base)
	require.NoError(t, err)
	require.Len(t, data, 2*size)
	data, err = l.Read(bs[2].base, 1<<20, bs[2].base)
	require.NoError(t, err)
	require.Empty(t, data)
	// A batch straddling maxOffset is included (its base is below it).
	data, err = l.Read(0, 1<<20, bs[2].base+1)
	require.NoError(t, err)
	require.Len(t, data, 3*size)

	// Mid-batch offset returns the containing batch.
	data, err = l.Read(bs[3].base+1, 1, hw)
	require.NoError(t, err)
	require.Equal(t, bs[3].bytes, data)

	// At the end: empty. Beyond: out of range.
	data, err = l.Read(l.LogEndOffset(), 100, hw)
	require.NoError(t, err)
	require.Empty(t, data)
	_, err = l.Read(l.LogEndOffset()+1, 100, hw)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, err = l.Read(-1, 100, hw)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	// ReadAppend appends to a caller buffer.
	buf := []byte("prefix")
	buf, err = l.ReadAppend(buf, 0, 1, hw)
	require.NoError(t, err)
	require.Equal(t, "prefix", string(buf[:6]))
	require.Equal(t, bs[0].bytes, buf[6:])
}

func TestReadHidesUndurableWithFlushAlways(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	// Stop the flusher from advancing anything by holding syncMu.
	l.syncMu.Lock()
	s := appendBatch(t, l, makeBatch(3, 10, 1, 1), 0)
	require.Equal(t, int64(3), l.LogEndOffset())
	require.Equal(t, int64(0), l.HighWatermark())
	data, err := l.Read(0, 1<<20, l.HighWatermark())
	require.NoError(t, err)
	require.Empty(t, data, "not yet durable")
	l.syncMu.Unlock()
	require.NoError(t, l.WaitDurable(context.Background(), s.last))
	require.Equal(t, int64(3), l.HighWatermark())
}

func TestSparseIndexLookups(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.SegmentBytes = 64 << 10
	opts.IndexIntervalBytes = 1000
	l := openLog(t, dir, opts)
	var want []stored
	for i := 0; i < 400; i++ {
		want = append(want, appendBatch(t, l, makeBatch(1+i%4, 40+i%200, int64(i), i), 0))
	}
	require.NoError(t, l.Sync())
	// The index is sparse: far fewer entries than batches.
	l.segMu.RLock()
	entries, batches := 0, len(want)
	for _, s := range l.segments {
		entries += s.offIdx.count()
	}
	l.segMu.RUnlock()
	require.Less(t, entries, batches/2)
	require.Greater(t, entries, 10)

	check := func(l *Log) {
		for _, s := range want {
			for _, off := range []int64{s.base, s.last} {
				data, err := l.Read(off, 1, l.HighWatermark())
				require.NoError(t, err)
				require.Equal(t, s.bytes, data, "offset %d", off)
			}
		}
	}
	check(l)
	// After a reopen the sealed segments are searched through the files.
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, opts)
	check(l2)
}

func TestAppendErrors(t *testing.T) {
	opts := testOptions(nil)
	opts.MaxMessageBytes = 500
	l := openLog(t, t.TempDir(), opts)
	_, err := l.Append(nil, 0)
	require.ErrorIs(t, err, batch.ErrInvalidRecord)
	_, err = l.Append([][]byte{makeBatch(1, 1000, 0, 0)}, 0)
	require.ErrorIs(t, err, batch.ErrTooLarge)
	b := makeBatch(1, 10, 0, 0)
	_, err = l.Append([][]byte{b[:len(b)-1]}, 0)
	require.ErrorIs(t, err, batch.ErrCorrupt)
	_, err = l.Append([][]byte{b[:20]}, 0)
	require.ErrorIs(t, err, batch.ErrCorrupt)
	require.Equal(t, int64(0), l.LogEndOffset(), "failed appends write nothing")

	// Atomic multi-batch append: contiguous offsets.
	res, err := l.Append([][]byte{makeBatch(2, 10, 0, 0), makeBatch(3, 10, 0, 1)}, 0)
	require.NoError(t, err)
	require.Equal(t, AppendResult{BaseOffset: 0, LastOffset: 4, LogStartOffset: 0}, res)

	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "idempotent")
	_, err = l.Append([][]byte{makeBatch(1, 1, 0, 0)}, 0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Read(0, 1, 10)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, l.WaitDurable(context.Background(), 0), nil, "offset 0 was durable before close")
	require.ErrorIs(t, l.WaitDurable(context.Background(), 100), ErrClosed)
	require.ErrorIs(t, l.Sync(), ErrClosed)
}

func TestAppendReplicated(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	b1 := makeBatch(3, 10, 0, 0)
	batch.SetBaseOffset(b1, 0)
	batch.SetPartitionLeaderEpoch(b1, 4)
	b2 := makeBatch(2, 10, 0, 1)
	batch.SetBaseOffset(b2, 10) // gap, as compaction leaves
	batch.SetPartitionLeaderEpoch(b2, 6)
	res, err := l.AppendReplicated([][]byte{b1, b2})
	require.NoError(t, err)
	require.Equal(t, int64(0), res.BaseOffset)
	require.Equal(t, int64(11), res.LastOffset)
	require.Equal(t, int64(12), l.LogEndOffset())
	require.Equal(t, []EpochEntry{{4, 0}, {6, 10}}, l.LeaderEpochs())

	data, err := l.Read(5, 1, 100)
	require.NoError(t, err, "offset in a gap reads the next batch")
	require.Equal(t, b2, data)

	b3 := makeBatch(1, 10, 0, 2)
	batch.SetBaseOffset(b3, 11)
	_, err = l.AppendReplicated([][]byte{b3})
	require.ErrorIs(t, err, ErrOutOfOrder)
}

func TestLeaderEpochs(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	appendBatch(t, l, makeBatch(2, 10, 0, 0), 1) // 0-1
	appendBatch(t, l, makeBatch(2, 10, 0, 0), 1) // 2-3
	appendBatch(t, l, makeBatch(2, 10, 0, 0), 3) // 4-5
	appendBatch(t, l, makeBatch(2, 10, 0, 0), 5) // 6-7
	require.Equal(t, []EpochEntry{{1, 0}, {3, 4}, {5, 6}}, l.LeaderEpochs())
	for _, tc := range []struct {
		req     int32
		epoch   int32
		endOffs int64
	}{
		{-1, -1, -1}, {0, 0, 0}, {1, 1, 4}, {2, 1, 4}, {3, 3, 6}, {4, 3, 6}, {5, 5, 8}, {6, -1, -1},
	} {
		e, o := l.EndOffsetForEpoch(tc.req)
		require.Equal(t, tc.epoch, e, "epoch for %d", tc.req)
		require.Equal(t, tc.endOffs, o, "end offset for %d", tc.req)
	}
	latest, ok := l.LatestEpoch()
	require.True(t, ok)
	require.Equal(t, int32(5), latest)

	// Persisted, and trimmed by truncation.
	require.NoError(t, l.TruncateTo(5))
	require.Equal(t, int64(4), l.LogEndOffset(), "straddling batch removed whole")
	require.Equal(t, []EpochEntry{{1, 0}}, l.LeaderEpochs(), "epoch 3 started at the new end")
	appendBatch(t, l, makeBatch(2, 10, 0, 0), 7) // 4-5
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, testOptions(nil))
	require.Equal(t, []EpochEntry{{1, 0}, {7, 4}}, l2.LeaderEpochs())
	require.Equal(t, int64(6), l2.LogEndOffset())
}

func TestTruncateTo(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	var want []stored
	for i := 0; i < 100; i++ {
		want = append(want, appendBatch(t, l, makeBatch(2, 100, int64(i*10), i), 0))
	}
	require.NoError(t, l.Sync())
	segs := l.SegmentCount()
	require.Greater(t, segs, 3)

	ch := l.Changed()
	require.NoError(t, l.TruncateTo(want[40].base))
	select {
	case <-ch:
	default:
		t.Fatal("Changed must fire on truncation")
	}
	require.Equal(t, want[40].base, l.LogEndOffset())
	require.Equal(t, want[40].base, l.HighWatermark())
	require.Less(t, l.SegmentCount(), segs)
	requireSameBatches(t, want[:40], readAll(t, l, 0, 1<<20))
	ts, tsOK := want[39].base, true
	off, _, ok, err := l.OffsetForTimestamp(int64(39 * 10))
	require.NoError(t, err)
	require.Equal(t, tsOK, ok)
	require.Equal(t, ts, off)
	_, _, ok, err = l.OffsetForTimestamp(int64(45 * 10))
	require.NoError(t, err)
	require.False(t, ok, "truncated timestamps are gone")

	// Appends continue from the cut and survive a crash.
	for i := 40; i < 60; i++ {
		want[i] = appendBatch(t, l, makeBatch(2, 100, int64(i*10), 1000+i), 0)
	}
	require.NoError(t, l.WaitDurable(context.Background(), want[59].last))
	l.crash()
	l2 := openLog(t, dir, testOptions(nil))
	requireSameBatches(t, want[:60], readAll(t, l2, 0, 1<<20))

	// Truncating below the log start restarts the log.
	_, err = l2.DeleteRecordsBefore(want[20].base)
	require.NoError(t, err)
	require.NoError(t, l2.TruncateTo(want[10].base))
	require.Equal(t, want[10].base, l2.LogStartOffset())
	require.Equal(t, want[10].base, l2.LogEndOffset())
	require.Equal(t, 1, l2.SegmentCount())
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testOptions(nil))
	for i := 0; i < 30; i++ {
		appendBatch(t, l, makeBatch(2, 100, 0, i), 2)
	}
	require.NoError(t, l.TruncateFullyAndStartAt(1000))
	require.Equal(t, int64(1000), l.LogStartOffset())
	require.Equal(t, int64(1000), l.LogEndOffset())
	require.Equal(t, 1, l.SegmentCount())
	require.Empty(t, l.LeaderEpochs())
	_, err := l.Read(10, 100, 2000)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	s := appendBatch(t, l, makeBatch(2, 10, 0, 0), 3)
	require.Equal(t, int64(1000), s.base)
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, testOptions(nil))
	require.Equal(t, int64(1000), l2.LogStartOffset())
	require.Equal(t, int64(1002), l2.LogEndOffset())
	requireSameBatches(t, []stored{s}, readAll(t, l2, 1000, 1<<20))
}

func TestBatches(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	var want []stored
	for i := 0; i < 60; i++ {
		want = append(want, appendBatch(t, l, makeBatch(3, 80, 0, i), 0))
	}
	var got []int64
	require.NoError(t, l.Batches(want[10].base+1, func(h batch.Header) bool {
		got = append(got, h.BaseOffset)
		return true
	}))
	require.Len(t, got, 50)
	require.Equal(t, want[10].base, got[0])
	require.Equal(t, want[59].base, got[49])
	n := 0
	require.NoError(t, l.Batches(0, func(batch.Header) bool { n++; return n < 5 }))
	require.Equal(t, 5, n)
}

func TestChangedFiresOnAppend(t *testing.T) {
	for _, always := range []bool{true, false} {
		opts := testOptions(nil)
		opts.FlushAlways = always
		l := openLog(t, t.TempDir(), opts)
		ch := l.Changed()
		select {
		case <-ch:
			t.Fatal("fired before any change")
		default:
		}
		appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("Changed did not fire (FlushAlways=%v)", always)
		}
		require.Equal(t, int64(1), l.HighWatermark())
		ch = l.Changed()
		require.NoError(t, l.Close())
		select {
		case <-ch:
		default:
			t.Fatal("Changed must fire on close")
		}
		<-l.Changed() // stays closed
	}
}

func TestSetOptions(t *testing.T) {
	opts := testOptions(nil)
	l := openLog(t, t.TempDir(), opts)
	l.syncMu.Lock() // keep the flusher from making anything durable
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	require.Equal(t, int64(0), l.HighWatermark())
	opts.FlushAlways = false
	require.NoError(t, l.SetOptions(opts))
	require.Equal(t, int64(1), l.HighWatermark(), "interval policy exposes the log end")
	require.NoError(t, l.WaitDurable(context.Background(), 0), "no durable wait with interval policy")
	l.syncMu.Unlock()
	opts.SegmentBytes = 1
	require.ErrorIs(t, l.SetOptions(opts), ErrInvalidOptions)
}

// The interval policy fsyncs on the flusher's ticker, which runs on the
// log's clock: nothing before the interval has passed, a round once it has.
func TestIntervalFlush(t *testing.T) {
	clk := newFakeClock()
	opts := testOptions(clk)
	opts.FlushAlways = false
	opts.FlushInterval = time.Second
	l := openLog(t, t.TempDir(), opts)
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	waitFor(t, "the flusher's ticker", func() bool { return slices.Contains(clk.Timers(), time.Second) })
	clk.Advance(time.Second - time.Nanosecond)
	require.Zero(t, l.Stats().Fsyncs, "no tick, no fsync")
	require.Zero(t, l.DurableOffset())
	clk.Advance(time.Nanosecond)
	waitFor(t, "interval fsync", func() bool { return l.DurableOffset() == 1 })
	require.Equal(t, uint64(1), l.Stats().Fsyncs)
}

// flush.messages under the interval policy: an fsync starts once that many
// offsets wait for the disk, without waiting for the (here: hour-long) tick.
func TestFlushMessages(t *testing.T) {
	opts := testOptions(nil)
	opts.FlushAlways = false
	opts.FlushInterval = time.Hour
	opts.FlushMessages = 5
	opts.EnsureDefaults()
	require.False(t, flushDue(3, 0, &opts), "3 offsets are fewer than flush.messages")
	require.True(t, flushDue(5, 0, &opts))
	require.False(t, flushDue(9, 5, &opts), "counted from the durable offset")

	// An append that makes it due starts an fsync; the hour-long interval
	// never would.
	l := openLog(t, t.TempDir(), opts)
	appendBatch(t, l, makeBatch(3, 10, 0, 0), 0)
	appendBatch(t, l, makeBatch(2, 10, 0, 0), 0)
	waitFor(t, "flush.messages fsync", func() bool { return l.DurableOffset() == 5 })

	opts.FlushMessages = 0 // the default: the interval only
	opts.EnsureDefaults()
	require.False(t, flushDue(math.MaxInt32, 0, &opts))
}

func TestDelete(t *testing.T) {
	dir := t.TempDir() + "/topic-0"
	l, err := Open(dir, testOptions(nil))
	require.NoError(t, err)
	appendBatch(t, l, makeBatch(1, 10, 0, 0), 0)
	require.NoError(t, l.Delete())
	require.NoDirExists(t, dir)
}
