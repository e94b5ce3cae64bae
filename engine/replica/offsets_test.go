package replica

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/log"
)

// The partition answers ListOffsets and DeleteRecords itself, under its own
// lock and rules, so the wire layer never reaches into the log.
func TestPartitionListOffsetAndDeleteRecords(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "o", Partition: 0}, nil)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		res, err := p.Append(producerBatch(-1, -1, -1, "a", "b"))
		require.NoError(t, err)
		require.NoError(t, p.WaitDurable(context.Background(), res))
	}
	off, ts, err := p.ListOffset(ListLatest)
	require.NoError(t, err)
	require.Equal(t, [2]int64{6, -1}, [2]int64{off, ts})
	off, _, err = p.ListOffset(ListEarliest)
	require.NoError(t, err)
	require.Zero(t, off)
	_, _, err = p.ListOffset(-7)
	require.ErrorIs(t, err, ErrInvalidListOffset)

	_, err = p.DeleteRecords(7)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange, "past the high watermark")
	low, err := p.DeleteRecords(2)
	require.NoError(t, err)
	require.Equal(t, int64(2), low)
	pos := p.Position()
	require.Equal(t, int64(2), pos.LogStart)
	require.Equal(t, int64(6), pos.HighWatermark)
	require.Equal(t, pos.HighWatermark, pos.LastStable, "no transactions: the LSO is the high watermark")
	low, err = p.DeleteRecords(-1)
	require.NoError(t, err)
	require.Equal(t, int64(6), low, "-1 deletes up to the high watermark")

	require.NoError(t, b.DeleteTopic("o"))
	_, err = p.DeleteRecords(-1)
	require.ErrorIs(t, err, ErrUnknownPartition, "a deleted partition takes no DeleteRecords")
}

// The leader epoch is partition state: MakeLeader sets it and every append
// is stamped with it; nobody passes one in.
func TestAppendsCarryTheEpochThePartitionLeadsIn(t *testing.T) {
	b := open(t, t.TempDir())
	defer b.Close()
	p, err := b.EnsurePartition(TopicPartition{Topic: "e", Partition: 0}, nil)
	require.NoError(t, err)
	p.MakeLeader(3)
	require.Equal(t, int32(3), p.LeaderEpoch())
	res, err := p.Append(producerBatch(-1, -1, -1, "a"))
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	data, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	h, err := batch.ParseHeader(data)
	require.NoError(t, err)
	require.Equal(t, int32(3), h.PartitionLeaderEpoch)
}
