package log

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
)

type timedBatch struct {
	stored
	kind int // 0 plain, 1 undecodable "compressed", 2 LogAppendTime, 3 really gzip-compressed
}

// modelOffsetForTimestamp is the brute-force answer: the first record (in
// offset order, at or after start) whose timestamp is >= ts; batch-level for
// LogAppendTime batches and compressed ones that do not decode.
func modelOffsetForTimestamp(t *testing.T, bs []timedBatch, ts, start int64) (int64, int64, bool) {
	for _, b := range bs {
		h, err := batch.ParseHeader(b.bytes)
		require.NoError(t, err)
		if b.last < start || h.MaxTimestamp < ts {
			continue
		}
		if b.kind == 1 || b.kind == 2 {
			return max(b.base, start), h.MaxTimestamp, true
		}
		var off, rts int64
		found := false
		require.NoError(t, batch.DecodeRecords(b.bytes, 1<<20, func(r batch.Record) bool {
			if o, rt := h.RecordOffset(r), h.RecordTimestamp(r); o >= start && rt >= ts {
				off, rts, found = o, rt, true
				return false
			}
			return true
		}))
		if found {
			return off, rts, true
		}
	}
	return 0, 0, false
}

func modelMaxTimestamp(t *testing.T, bs []timedBatch) (int64, int64) {
	bestOff, bestTs := int64(-1), int64(-1)
	var best timedBatch
	for _, b := range bs {
		h, err := batch.ParseHeader(b.bytes)
		require.NoError(t, err)
		if h.MaxTimestamp > bestTs {
			bestTs, bestOff, best = h.MaxTimestamp, b.base, b
		}
	}
	if bestOff < 0 || best.kind == 1 || best.kind == 2 {
		return bestOff, bestTs
	}
	h, _ := batch.ParseHeader(best.bytes)
	_ = batch.DecodeRecords(best.bytes, 1<<20, func(r batch.Record) bool {
		if h.RecordTimestamp(r) == bestTs {
			bestOff = h.RecordOffset(r)
			return false
		}
		return true
	})
	return bestOff, bestTs
}

func TestOffsetForTimestamp(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(nil)
	opts.IndexIntervalBytes = 400
	l := openLog(t, dir, opts)

	off, ts := l.MaxTimestamp()
	require.Equal(t, int64(-1), off)
	require.Equal(t, int64(-1), ts)
	_, _, ok, err := l.OffsetForTimestamp(0)
	require.NoError(t, err)
	require.False(t, ok)

	rng := rand.New(rand.NewPCG(3, 4))
	var bs []timedBatch
	for i := 0; i < 250; i++ {
		// Mostly increasing timestamps with jitter, so some batches go
		// backwards in time.
		base := int64(100_000 + i*20 + rng.IntN(60) - 30)
		b := makeBatch(1+rng.IntN(6), rng.IntN(150), base, i)
		kind := 0
		switch rng.IntN(10) {
		case 0:
			kind = 1
			compress(b)
		case 1:
			kind = 2
			batch.SetLogAppendTime(b, base+5)
		case 2, 3:
			kind = 3
			b = gzipBatch(t, b)
		}
		bs = append(bs, timedBatch{stored: appendBatch(t, l, b, 0), kind: kind})
	}
	require.NoError(t, l.Sync())

	check := func(l *Log) {
		t.Helper()
		start := l.LogStartOffset()
		for ts := int64(99_900); ts < 100_000+250*20+100; ts += 7 {
			wOff, wTs, wOK := modelOffsetForTimestamp(t, bs, ts, start)
			off, rts, ok, err := l.OffsetForTimestamp(ts)
			require.NoError(t, err)
			require.Equal(t, wOK, ok, "ts %d", ts)
			if ok {
				require.Equal(t, wOff, off, "offset for ts %d", ts)
				require.Equal(t, wTs, rts, "timestamp for ts %d", ts)
			}
		}
		wOff, wTs := modelMaxTimestamp(t, bs)
		off, ts := l.MaxTimestamp()
		require.Equal(t, wOff, off)
		require.Equal(t, wTs, ts)
	}
	check(l)
	require.Greater(t, l.SegmentCount(), 3)

	// Sealed segments after a reopen are searched through the index files.
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, opts)
	check(l2)

	// Records below the log start are not returned.
	mid := bs[100].base + 1
	_, err = l2.DeleteRecordsBefore(mid)
	require.NoError(t, err)
	check(l2)
}

func TestOffsetForTimestampStopsAtHighWatermark(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	appendBatch(t, l, makeBatch(2, 10, 100, 0), 0)
	require.NoError(t, l.Sync())
	l.syncMu.Lock()
	appendBatch(t, l, makeBatch(2, 10, 500, 1), 0)
	_, _, ok, err := l.OffsetForTimestamp(400)
	require.NoError(t, err)
	require.False(t, ok, "not yet durable, so not visible")
	off, _, ok, err := l.OffsetForTimestamp(100)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(0), off)
	l.syncMu.Unlock()
}

// TestTimestampLookupDistrustsCompressedOffsets: compressed payloads are not
// decoded on produce, so a batch whose inner offsets leave its own range
// answers as a whole instead of pointing at offsets it does not hold.
func TestTimestampLookupDistrustsCompressedOffsets(t *testing.T) {
	l := openLog(t, t.TempDir(), testOptions(nil))
	appendBatch(t, l, makeBatch(3, 10, 1000, 0), 0) // offsets 0..2, ts 1000..1002

	recs := []batch.Record{
		{OffsetDelta: 0, TimestampDelta: 0, Value: []byte("a")},
		{OffsetDelta: 1_000_000, TimestampDelta: 3000, Value: []byte("b")},
		{OffsetDelta: 1_000_001, TimestampDelta: 3001, Value: []byte("c")},
	}
	b := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 4001}, recs)
	binary.BigEndian.PutUint32(b[23:], 2) // LastOffsetDelta: three offsets, as NumRecords says
	b = gzipBatch(t, b)
	s := appendBatch(t, l, b, 0) // offsets 3..5
	require.NoError(t, l.Sync())

	off, ts, ok, err := l.OffsetForTimestamp(3500)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, s.base, off, "the batch answers as a whole")
	require.Equal(t, int64(4001), ts)

	off, ts = l.MaxTimestamp()
	require.Equal(t, s.base, off)
	require.Equal(t, int64(4001), ts)
	require.Less(t, off, l.LogEndOffset())
}
