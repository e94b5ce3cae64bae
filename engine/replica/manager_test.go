package replica

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/clock"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/engine/txn"
)

func open(t *testing.T, dir string) *Manager {
	t.Helper()
	b, err := Open(Options{DataDir: dir, Clock: clock.NewFake(time.UnixMilli(1_700_000_000_000))})
	require.NoError(t, err)
	return b
}

func producerBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	recs := make([]batch.Record, len(values))
	for i, v := range values {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte(v)}
	}
	return batch.Build(batch.Header{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		FirstTimestamp: 1000, MaxTimestamp: 1000}, recs)
}

// keyedBatch is a plain batch of one record with a key.
func keyedBatch(key, value string) []byte {
	return batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1000},
		[]batch.Record{{Key: []byte(key), Value: []byte(value)}})
}

func TestIdempotentAppendSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	tp := TopicPartition{Topic: "orders", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)

	r1, err := p.Append(producerBatch(7, 0, 0, "a", "b"))
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), r1))
	r2, err := p.Append(producerBatch(7, 0, 2, "c"))
	require.NoError(t, err)
	require.Equal(t, int64(2), r2.BaseOffset)

	// A retry is answered with the original offset and stores nothing.
	dup, err := p.Append(producerBatch(7, 0, 0, "a", "b"))
	require.NoError(t, err)
	require.Equal(t, int64(0), dup.BaseOffset)
	require.Equal(t, int64(3), p.log.LogEndOffset())

	_, err = p.Append(producerBatch(7, 0, 9, "gap"))
	require.ErrorIs(t, err, txn.ErrOutOfOrderSequence)
	require.NoError(t, b.Close())

	// After a restart the producer state is rebuilt from the log.
	b = open(t, dir)
	defer b.Close()
	p, err = b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	dup, err = p.Append(producerBatch(7, 0, 2, "c"))
	require.NoError(t, err)
	require.Equal(t, int64(2), dup.BaseOffset)
	require.Equal(t, int64(3), p.log.LogEndOffset())
}

func TestAppendRejectsBadBatchesWhole(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "t", Partition: 0}, map[string]string{"max.message.bytes": "200"})
	require.NoError(t, err)

	good := producerBatch(-1, -1, -1, "ok")
	bad := producerBatch(-1, -1, -1, "corrupt")
	bad[len(bad)-1] ^= 0xff // breaks the CRC
	_, err = p.Append(append(append([]byte{}, good...), bad...))
	require.ErrorIs(t, err, batch.ErrCorrupt)
	require.Equal(t, int64(0), p.log.LogEndOffset(), "nothing of a bad request is stored")

	big := producerBatch(-1, -1, -1, string(make([]byte, 300)))
	_, err = p.Append(big)
	require.ErrorIs(t, err, batch.ErrTooLarge)

	_, err = p.Append(nil)
	require.ErrorIs(t, err, batch.ErrInvalidRecord)

	// An idempotent batch behind a plain one would skip the sequence check.
	_, err = p.Append(append(producerBatch(-1, -1, -1, "plain"), producerBatch(7, 0, 0, "idem")...))
	require.ErrorIs(t, err, batch.ErrInvalidRecord)
	require.Equal(t, int64(0), p.log.LogEndOffset())
}

func TestLogAppendTimeStampsBatches(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "t", Partition: 0}, map[string]string{"message.timestamp.type": "LogAppendTime"})
	require.NoError(t, err)
	res, err := p.Append(producerBatch(-1, -1, -1, "x"))
	require.NoError(t, err)
	require.Equal(t, int64(1_700_000_000_000), res.LogAppendTime)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	data, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	h, err := batch.ParseHeader(data)
	require.NoError(t, err)
	require.True(t, h.LogAppendTime())
	require.Equal(t, int64(1_700_000_000_000), h.MaxTimestamp)
}

// timedBatch is a one-record batch stamped ts (CreateTime).
func timedBatch(ts int64) []byte {
	return batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: ts, MaxTimestamp: ts},
		[]batch.Record{{Value: []byte("v")}})
}

// message.timestamp.before.max.ms and .after.max.ms refuse CreateTime
// records too far from the broker's clock with INVALID_TIMESTAMP, storing
// nothing of the request; the deprecated difference stands in for unset
// bounds; LogAppendTime topics are not checked.
func TestTimestampBounds(t *testing.T) {
	const now = 1_700_000_000_000
	b := open(t, t.TempDir())
	defer b.Close()
	part := func(name string, cfg map[string]string) *Partition {
		p, err := b.EnsurePartition(TopicPartition{Topic: name, Partition: 0}, cfg)
		require.NoError(t, err)
		return p
	}

	def := part("defaults", nil)
	_, err := def.Append(timedBatch(1000))
	require.NoError(t, err, "no lower bound by default")
	_, err = def.Append(timedBatch(now + time.Hour.Milliseconds()))
	require.NoError(t, err, "an hour ahead is Kafka 4's default limit")
	_, err = def.Append(timedBatch(now + time.Hour.Milliseconds() + 1))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	require.Contains(t, err.Error(), "message.timestamp.after.max.ms allows 3600000")

	p := part("bounded", map[string]string{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "0"})
	_, err = p.Append(timedBatch(now - 60000))
	require.NoError(t, err)
	_, err = p.Append(append(timedBatch(now), timedBatch(now-60001)...))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	require.Contains(t, err.Error(), "batch 1 has a record with timestamp 1699999939999, 60001 ms before")
	require.Contains(t, err.Error(), "[1699999940000, 1700000000000]")
	_, err = p.Append(timedBatch(now + 1))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	_, err = p.Append(timedBatch(batch.NoTimestamp))
	require.NoError(t, err, "records without a timestamp are not checked")
	require.Equal(t, int64(2), p.log.LogEndOffset())

	// One record out of range in a batch is enough.
	mixed := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: now, MaxTimestamp: now},
		[]batch.Record{{Value: []byte("a")}, {OffsetDelta: 1, TimestampDelta: -120000, Value: []byte("b")}})
	_, err = p.Append(mixed)
	require.ErrorIs(t, err, ErrInvalidTimestamp)

	diff := part("difference", map[string]string{"message.timestamp.difference.max.ms": "1000"})
	_, err = diff.Append(timedBatch(now - 1001))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	_, err = diff.Append(timedBatch(now + 1001))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	_, err = diff.Append(timedBatch(now - 1000))
	require.NoError(t, err)

	lat := part("append-time", map[string]string{"message.timestamp.type": "LogAppendTime", "message.timestamp.after.max.ms": "0"})
	_, err = lat.Append(timedBatch(now + time.Hour.Milliseconds()*10))
	require.NoError(t, err)

	// A far-off timestamp does not overflow the comparison.
	_, err = p.Append(timedBatch(-1 << 62))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	_, err = def.Append(timedBatch(1 << 62))
	require.ErrorIs(t, err, ErrInvalidTimestamp)
}

// compression.type other than producer stores every batch in that codec,
// recompressed by the broker; the records are the producer's.
func TestCompressionTypeRecompresses(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	values := []string{"alpha", "beta", "gamma", "delta"}
	plain := producerBatch(9, 1, 0, values...)
	gz, err := batch.Recompress(plain, batch.CompressionGzip, -1, batch.MaxDecompressed)
	require.NoError(t, err)

	for i, tc := range []struct {
		cfg  map[string]string
		in   []byte
		want int8
	}{
		{map[string]string{"compression.type": "zstd"}, plain, batch.CompressionZstd},
		{map[string]string{"compression.type": "lz4", "compression.lz4.level": "4"}, gz, batch.CompressionLZ4},
		{map[string]string{"compression.type": "snappy"}, plain, batch.CompressionSnappy},
		{map[string]string{"compression.type": "gzip", "compression.gzip.level": "1"}, plain, batch.CompressionGzip},
		{map[string]string{"compression.type": "uncompressed"}, gz, batch.CompressionNone},
		{map[string]string{"compression.type": "gzip"}, gz, batch.CompressionGzip},
		{nil, gz, batch.CompressionGzip},
		{map[string]string{"compression.type": "producer"}, plain, batch.CompressionNone},
	} {
		p, err := b.EnsurePartition(TopicPartition{Topic: "c", Partition: int32(i)}, tc.cfg)
		require.NoError(t, err)
		res, err := p.Append(append([]byte(nil), tc.in...))
		require.NoError(t, err, "case %d", i)
		require.NoError(t, p.WaitDurable(context.Background(), res))
		data, err := p.Read(0, 1<<20)
		require.NoError(t, err)
		h, err := batch.Validate(data, 0)
		require.NoError(t, err, "case %d: the stored batch is valid", i)
		require.Equal(t, tc.want, h.Compression(), "case %d", i)
		require.Equal(t, int64(9), h.ProducerID, "case %d: producer fields kept", i)
		require.Equal(t, res.Bytes, len(data), "case %d: the stored size is reported", i)
		var got []string
		require.NoError(t, batch.DecodeRecords(data, 1<<20, func(r batch.Record) bool { got = append(got, string(r.Value)); return true }))
		require.Equal(t, values, got, "case %d", i)
		if in, err := batch.ParseHeader(tc.in); err == nil && in.Compression() == tc.want { // same codec in and out
			require.Equal(t, tc.in, data[:len(tc.in)], "case %d: a batch already in the codec is stored as produced", i)
		}
	}

	// max.message.bytes applies to the recompressed batch too.
	big := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1000},
		[]batch.Record{{Value: make([]byte, 4000)}})
	small, err := batch.Recompress(big, batch.CompressionZstd, 3, batch.MaxDecompressed)
	require.NoError(t, err)
	require.Less(t, len(small), 1000)
	p, err := b.EnsurePartition(TopicPartition{Topic: "limit", Partition: 0},
		map[string]string{"compression.type": "uncompressed", "max.message.bytes": "1000"})
	require.NoError(t, err)
	_, err = p.Append(small)
	require.ErrorIs(t, err, batch.ErrTooLarge)
	require.Contains(t, err.Error(), "recompressed with uncompressed within max.message.bytes (1000)")
	require.Zero(t, p.log.LogEndOffset())
}

// A small batch whose records decode to far more than max.message.bytes
// allows is refused before recompression holds them all: four such
// batches of 16 KB once made the broker allocate 2.8 GB.
func TestRecompressionIsBoundedByMaxMessageBytes(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	bomb, err := batch.Recompress(batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1000, MaxTimestamp: 1000},
		[]batch.Record{{Value: make([]byte, 64<<20)}}), batch.CompressionZstd, 3, batch.MaxDecompressed)
	require.NoError(t, err)
	require.Less(t, len(bomb), 64<<10)
	for i, codec := range []string{"uncompressed", "gzip"} {
		p, err := b.EnsurePartition(TopicPartition{Topic: "bomb", Partition: int32(i)}, map[string]string{"compression.type": codec})
		require.NoError(t, err)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = p.Append(append([]byte(nil), bomb...))
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, batch.ErrTooLarge, codec)
		require.Contains(t, err.Error(), "decode to more than")
		// Decoding to the 16 MiB bound takes about 34 MiB (69 under
		// -race); unbounded, the 64 MiB of records took over 128 MiB.
		t.Logf("%s: %d MiB allocated", codec, (after.TotalAlloc-before.TotalAlloc)>>20)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(100<<20),
			"%s: recompressing holds at most what could fit max.message.bytes", codec)
	}
}

// The log options carry segment.jitter.ms, segment.index.bytes and
// flush.messages; segment.index.bytes=4 (no index entry fits) rolls a
// segment per batch.
func TestLogOptionsCarryTopicConfigs(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "idx", Partition: 0}, map[string]string{
		"segment.index.bytes": "4", "index.interval.bytes": "1", "segment.jitter.ms": "1000", "flush.messages": "3"})
	require.NoError(t, err)
	o := logOptions(p.tp, p.cfg, p.opts)
	require.Equal(t, 4, o.MaxIndexBytes)
	require.Equal(t, time.Second, o.SegmentJitter)
	require.Equal(t, int64(3), o.FlushMessages)
	for i := 0; i < 3; i++ {
		_, err := p.Append(producerBatch(-1, -1, -1, "x"))
		require.NoError(t, err)
	}
	require.Equal(t, 3, p.log.SegmentCount())
}

func TestDataDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	_, err := Open(Options{DataDir: dir})
	require.ErrorIs(t, err, ErrDataDirLocked)
	require.NoError(t, b.Close())
	b = open(t, dir)
	require.NoError(t, b.Close())
}

func TestDeleteTopicAndOrphans(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	defer b.Close()
	for i := int32(0); i < 2; i++ {
		_, err := b.EnsurePartition(TopicPartition{Topic: "gone-topic", Partition: i}, nil)
		require.NoError(t, err)
	}
	_, err := b.EnsurePartition(TopicPartition{Topic: "kept", Partition: 0}, nil)
	require.NoError(t, err)
	require.NoError(t, b.DeleteTopic("gone-topic"))
	_, err = b.Partition(TopicPartition{Topic: "gone-topic", Partition: 0})
	require.ErrorIs(t, err, ErrUnknownPartition)
	require.Len(t, b.Partitions(), 1)

	tp, ok := parseDirName("my-topic-12")
	require.True(t, ok)
	require.Equal(t, TopicPartition{Topic: "my-topic", Partition: 12}, tp)
	_, ok = parseDirName("meta")
	require.False(t, ok)
}

// TestProducerStateWithoutSnapshot: a missing or unusable snapshot (stale
// offset, damaged bytes) costs only a longer replay: the state is rebuilt
// from the log.
func TestProducerStateWithoutSnapshot(t *testing.T) {
	for _, damage := range []string{"missing", "stale", "damaged"} {
		dir := t.TempDir()
		b := open(t, dir)
		tp := TopicPartition{Topic: "orders", Partition: 0}
		p, err := b.EnsurePartition(tp, nil)
		require.NoError(t, err)
		_, err = p.Append(producerBatch(9, 1, 0, "a"))
		require.NoError(t, err)
		require.NoError(t, b.Close())
		snap := filepath.Join(dir, "orders-0", snapshotName(1))
		switch damage {
		case "missing":
			require.NoError(t, os.Remove(snap))
		case "stale":
			require.NoError(t, os.WriteFile(snap, []byte(`{"version":1,"offset":77,"producers":{}}`), 0o644))
		case "damaged":
			data, err := os.ReadFile(snap)
			require.NoError(t, err)
			data[len(data)-3] ^= 1
			require.NoError(t, os.WriteFile(snap, data, 0o644))
		}
		b = open(t, dir)
		p, err = b.EnsurePartition(tp, nil)
		require.NoError(t, err)
		dup, err := p.Append(producerBatch(9, 1, 0, "a"))
		require.NoError(t, err)
		require.Equal(t, int64(0), dup.BaseOffset)
		require.Equal(t, int64(1), p.log.LogEndOffset(), "%s: the retry was not stored again", damage)
		_, err = p.Append(producerBatch(9, 0, 1, "old epoch"))
		require.ErrorIs(t, err, txn.ErrInvalidEpoch)
		require.NoError(t, b.Close())
		_, err = os.Stat(snap)
		require.NoError(t, err, "a clean close writes the snapshot")
	}
}

// TestCompactOnlyTopicsIgnoreRetention: with cleanup.policy=compact alone,
// age and size retention never delete data (Kafka semantics).
func TestCompactOnlyTopicsIgnoreRetention(t *testing.T) {
	clk := clock.NewFake(time.UnixMilli(1_700_000_000_000))
	b, err := Open(Options{DataDir: t.TempDir(), Clock: clk})
	require.NoError(t, err)
	defer b.Close()
	for _, policy := range []string{"compact", "delete"} {
		p, err := b.EnsurePartition(TopicPartition{Topic: policy, Partition: 0}, map[string]string{
			"cleanup.policy": policy, "retention.ms": "1000", "retention.bytes": "1", "segment.bytes": "1024",
		})
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			// Keyed: a compacted topic refuses keyless records.
			res, err := p.Append(keyedBatch(fmt.Sprint(i), string(make([]byte, 200))))
			require.NoError(t, err)
			require.NoError(t, p.WaitDurable(context.Background(), res))
		}
	}
	clk.Advance(time.Hour)
	b.EnforceRetention()
	c, _ := b.Partition(TopicPartition{Topic: "compact", Partition: 0})
	d, _ := b.Partition(TopicPartition{Topic: "delete", Partition: 0})
	require.Equal(t, int64(0), c.log.LogStartOffset())
	require.Greater(t, d.log.LogStartOffset(), int64(0))
}

// max.message.bytes=0 is the log's default limit everywhere, recompression
// included: it used to refuse every batch of a recompressing topic.
func TestZeroMaxMessageBytesIsTheDefaultEverywhere(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "z", Partition: 0},
		map[string]string{"compression.type": "gzip", "max.message.bytes": "0"})
	require.NoError(t, err)
	_, err = p.Append(producerBatch(-1, -1, -1, "a"))
	require.NoError(t, err)
}

// The topics NoGroupCommitWindow names fsync back to back; others keep the
// node's window.
func TestNoGroupCommitWindow(t *testing.T) {
	opts := Options{GroupCommitWindow: time.Millisecond, NoGroupCommitWindow: func(topic string) bool { return topic == "__txns" },
		Logger: slog.New(slog.DiscardHandler)}
	require.Equal(t, time.Duration(0), logOptions(TopicPartition{Topic: "__txns"}, topicconfig.Config{}, opts).GroupCommitWindow)
	require.Equal(t, time.Millisecond, logOptions(TopicPartition{Topic: "orders"}, topicconfig.Config{}, opts).GroupCommitWindow)
	opts.NoGroupCommitWindow = nil
	require.Equal(t, time.Millisecond, logOptions(TopicPartition{Topic: "__txns"}, topicconfig.Config{}, opts).GroupCommitWindow)
}
