package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOffsets(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "offsets")
	base := time.UnixMilli(1_700_000_000_000)
	seedTopic(t, cl, topic, 2, 5, base)

	offs, err := cl.ListOffsets(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, []PartitionOffsets{{0, 0, 5}, {1, 0, 5}}, offs)
	require.Equal(t, int64(5), offs[0].Records())

	at, err := cl.OffsetsForTimestamp(ctx, topic, base.Add(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, []PartitionOffset{
		{Partition: 0, Offset: 2, Timestamp: base.Add(2 * time.Second)},
		{Partition: 1, Offset: 2, Timestamp: base.Add(2 * time.Second)},
	}, at)
	// No record at or after the time: the end offset.
	at, err = cl.OffsetsForTimestamp(ctx, topic, base.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(5), at[0].Offset)
	require.True(t, at[0].Timestamp.IsZero())

	start, err := cl.DeleteRecords(ctx, topic, 1, 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), start)
	offs, err = cl.ListOffsets(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, []PartitionOffsets{{0, 0, 5}, {1, 3, 5}}, offs)

	got, err := cl.Read(ctx, ReadRequest{Topic: topic, Partitions: []int32{1}})
	require.NoError(t, err)
	require.Equal(t, []string{"p1-3", "p1-4"}, values(got))
	// An offset before the log start is clamped to it.
	got, err = cl.Read(ctx, ReadRequest{Topic: topic, Partitions: []int32{1}, Start: Offset(1)})
	require.NoError(t, err)
	require.Equal(t, []string{"p1-3", "p1-4"}, values(got))

	// -1 deletes up to the high watermark.
	start, err = cl.DeleteRecords(ctx, topic, 0, -1)
	require.NoError(t, err)
	require.Equal(t, int64(5), start)

	_, err = cl.DeleteRecords(ctx, topic, 0, 99)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, "OFFSET_OUT_OF_RANGE", ErrorName(err))
	_, err = cl.DeleteRecords(ctx, topic, 0, -7)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = cl.DeleteRecords(ctx, topic, 9, 1)
	require.ErrorIs(t, err, ErrNotFound)
}
