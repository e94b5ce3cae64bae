package broker

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/txn"
)

func open(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := Open(Options{DataDir: dir, Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }})
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

func TestIdempotentAppendSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	tp := TopicPartition{Topic: "orders", Partition: 0}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)

	r1, err := p.Append(producerBatch(7, 0, 0, "a", "b"), 0)
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), r1))
	r2, err := p.Append(producerBatch(7, 0, 2, "c"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), r2.BaseOffset)

	// A retry is answered with the original offset and stores nothing.
	dup, err := p.Append(producerBatch(7, 0, 0, "a", "b"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), dup.BaseOffset)
	require.Equal(t, int64(3), p.Log().LogEndOffset())

	_, err = p.Append(producerBatch(7, 0, 9, "gap"), 0)
	require.ErrorIs(t, err, txn.ErrOutOfOrderSequence)
	require.NoError(t, b.Close())

	// After a restart the producer state is rebuilt from the log.
	b = open(t, dir)
	defer b.Close()
	p, err = b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	dup, err = p.Append(producerBatch(7, 0, 2, "c"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), dup.BaseOffset)
	require.Equal(t, int64(3), p.Log().LogEndOffset())
}

func TestAppendRejectsBadBatchesWhole(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "t", Partition: 0}, map[string]string{"max.message.bytes": "200"})
	require.NoError(t, err)

	good := producerBatch(-1, -1, -1, "ok")
	bad := producerBatch(-1, -1, -1, "corrupt")
	bad[len(bad)-1] ^= 0xff // breaks the CRC
	_, err = p.Append(append(append([]byte{}, good...), bad...), 0)
	require.ErrorIs(t, err, batch.ErrCorrupt)
	require.Equal(t, int64(0), p.Log().LogEndOffset(), "nothing of a bad request is stored")

	big := producerBatch(-1, -1, -1, string(make([]byte, 300)))
	_, err = p.Append(big, 0)
	require.ErrorIs(t, err, batch.ErrTooLarge)

	_, err = p.Append(nil, 0)
	require.ErrorIs(t, err, batch.ErrInvalidRecord)

	// An idempotent batch behind a plain one would skip the sequence check.
	_, err = p.Append(append(producerBatch(-1, -1, -1, "plain"), producerBatch(7, 0, 0, "idem")...), 0)
	require.ErrorIs(t, err, batch.ErrInvalidRecord)
	require.Equal(t, int64(0), p.Log().LogEndOffset())
}

func TestLogAppendTimeStampsBatches(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "t", Partition: 0}, map[string]string{"message.timestamp.type": "LogAppendTime"})
	require.NoError(t, err)
	res, err := p.Append(producerBatch(-1, -1, -1, "x"), 0)
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
		_, err = p.Append(producerBatch(9, 1, 0, "a"), 0)
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
		dup, err := p.Append(producerBatch(9, 1, 0, "a"), 0)
		require.NoError(t, err)
		require.Equal(t, int64(0), dup.BaseOffset)
		require.Equal(t, int64(1), p.Log().LogEndOffset(), "%s: the retry was not stored again", damage)
		_, err = p.Append(producerBatch(9, 0, 1, "old epoch"), 0)
		require.ErrorIs(t, err, txn.ErrInvalidEpoch)
		require.NoError(t, b.Close())
		_, err = os.Stat(snap)
		require.NoError(t, err, "a clean close writes the snapshot")
	}
}

// TestCompactOnlyTopicsIgnoreRetention: with cleanup.policy=compact alone,
// age and size retention never delete data (Kafka semantics).
func TestCompactOnlyTopicsIgnoreRetention(t *testing.T) {
	var now atomic.Int64 // read by every log's flusher: Options.Now must be safe for concurrent use
	now.Store(1_700_000_000_000)
	b, err := Open(Options{DataDir: t.TempDir(), Now: func() time.Time { return time.UnixMilli(now.Load()) }})
	require.NoError(t, err)
	defer b.Close()
	for _, policy := range []string{"compact", "delete"} {
		p, err := b.EnsurePartition(TopicPartition{Topic: policy, Partition: 0}, map[string]string{
			"cleanup.policy": policy, "retention.ms": "1000", "retention.bytes": "1", "segment.bytes": "1024",
		})
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			res, err := p.Append(producerBatch(-1, -1, -1, string(make([]byte, 200))), 0)
			require.NoError(t, err)
			require.NoError(t, p.WaitDurable(context.Background(), res))
		}
	}
	now.Add(time.Hour.Milliseconds())
	b.EnforceRetention()
	c, _ := b.Partition(TopicPartition{Topic: "compact", Partition: 0})
	d, _ := b.Partition(TopicPartition{Topic: "delete", Partition: 0})
	require.Equal(t, int64(0), c.Log().LogStartOffset())
	require.Greater(t, d.Log().LogStartOffset(), int64(0))
}
