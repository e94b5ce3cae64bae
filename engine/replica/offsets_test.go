package replica

import (
	"context"
	"testing"
	"time"

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
	lo, err := p.ListOffset(ListOffsetParams{Timestamp: ListLatest, CurrentLeaderEpoch: NoLeaderEpoch})
	require.NoError(t, err)
	require.Equal(t, ListOffsetResult{Offset: 6, Timestamp: -1}, lo)
	lo, err = p.ListOffset(ListOffsetParams{Timestamp: ListEarliest, CurrentLeaderEpoch: NoLeaderEpoch})
	require.NoError(t, err)
	require.Zero(t, lo.Offset)
	_, err = p.ListOffset(ListOffsetParams{Timestamp: -7, CurrentLeaderEpoch: NoLeaderEpoch})
	require.ErrorIs(t, err, ErrInvalidListOffset)

	_, err = p.DeleteRecords(7)
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange, "past the high watermark")
	low, err := p.DeleteRecords(2)
	require.NoError(t, err)
	require.Equal(t, int64(2), low)
	res, err := p.Fetch(FetchParams{Offset: 1, CurrentLeaderEpoch: NoLeaderEpoch, ReplicaID: -1})
	require.ErrorIs(t, err, log.ErrOffsetOutOfRange, "below the new log start")
	require.Equal(t, int64(2), res.LogStart)
	require.Equal(t, int64(6), res.HighWatermark)
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

// held opens a partition whose high watermark trails its log end: the
// first append is fsynced at once, the next waits out an hour-long
// group-commit window, so offsets [hw, end) are written but not readable.
// The readable records have timestamp 1000, the one past hw 2000.
func held(t *testing.T) (p *Partition, hw, end int64) {
	t.Helper()
	b, err := Open(Options{DataDir: t.TempDir(), GroupCommitWindow: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	p, err = b.EnsurePartition(TopicPartition{Topic: "f", Partition: 0}, nil)
	require.NoError(t, err)
	p.MakeLeader(3)
	res, err := p.Append(producerBatch(-1, -1, -1, "a", "b"))
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	_, err = p.Append(batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		FirstTimestamp: 2000, MaxTimestamp: 2000}, []batch.Record{{Value: []byte("c")}}))
	require.NoError(t, err)
	require.Equal(t, int64(2), p.HighWatermark(), "the second append waits for its fsync")
	return p, 2, 3
}

// A consumer reads up to the bound of its isolation level; an offset at or
// past it, up to the log end, reads nothing and takes no room; one outside
// the log is out of range.
func TestFetchReadsUpToTheIsolationBound(t *testing.T) {
	p, hw, end := held(t)
	for _, iso := range []IsolationLevel{ReadUncommitted, ReadCommitted} {
		res, err := p.Fetch(FetchParams{Offset: 0, MaxBytes: 1 << 20, Isolation: iso, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch})
		require.NoError(t, err)
		require.Equal(t, hw, res.HighWatermark)
		require.Equal(t, res.HighWatermark, res.LastStable, "no transactions: the LSO is the high watermark")
		require.Zero(t, res.LogStart)
		require.Empty(t, res.Aborted, "no transactions, none aborted")
		require.NotNil(t, res.Changed)
		var last int64
		require.NoError(t, batch.Iterate(res.Batches, func(h batch.Header, _ []byte) bool {
			last = h.LastOffset()
			return true
		}))
		require.Equal(t, hw-1, last, "isolation %d: nothing past the bound", iso)

		for _, off := range []int64{hw, end} {
			asked := false
			res, err = p.Fetch(FetchParams{Offset: off, Isolation: iso, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch,
				Room: func() ([]byte, int, bool) { asked = true; return nil, 1 << 20, true }})
			require.NoError(t, err, "offset %d", off)
			require.Empty(t, res.Batches)
			require.False(t, asked, "offset %d: nothing to read takes no room", off)
		}
		_, err = p.Fetch(FetchParams{Offset: end + 1, Isolation: iso, ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch})
		require.ErrorIs(t, err, log.ErrOffsetOutOfRange)
	}
}

// Room is asked once there is something to read: the batches go into the
// buffer it gives, and a refusal reads nothing.
func TestFetchRoom(t *testing.T) {
	p, _, _ := held(t)
	buf := make([]byte, 0, 1<<10)
	res, err := p.Fetch(FetchParams{ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch,
		Room: func() ([]byte, int, bool) { return buf, 1, true }})
	require.NoError(t, err)
	require.NotEmpty(t, res.Batches, "the first batch comes whole past maxBytes")
	require.Equal(t, &buf[:1][0], &res.Batches[0], "read into the buffer Room gave")
	res, err = p.Fetch(FetchParams{ReplicaID: -1, CurrentLeaderEpoch: NoLeaderEpoch,
		Room: func() ([]byte, int, bool) { return nil, 0, false }})
	require.NoError(t, err)
	require.Empty(t, res.Batches)
	require.Equal(t, int64(2), res.HighWatermark, "the offsets are answered without room")
}

// The leader epoch a request names is checked against the partition's, as
// Kafka's checkCurrentLeaderEpoch does, for Fetch and ListOffsets alike.
func TestLeaderEpochIsChecked(t *testing.T) {
	p, hw, _ := held(t) // leads in epoch 3
	for _, tc := range []struct {
		epoch int32
		want  error
	}{{NoLeaderEpoch, nil}, {3, nil}, {2, ErrFencedLeaderEpoch}, {4, ErrUnknownLeaderEpoch}} {
		res, err := p.Fetch(FetchParams{ReplicaID: -1, MaxBytes: 1 << 20, CurrentLeaderEpoch: tc.epoch})
		lo, lerr := p.ListOffset(ListOffsetParams{Timestamp: ListLatest, CurrentLeaderEpoch: tc.epoch})
		if tc.want == nil {
			require.NoError(t, err, "epoch %d", tc.epoch)
			require.NotEmpty(t, res.Batches)
			require.NoError(t, lerr)
			require.Equal(t, ListOffsetResult{Offset: hw, Timestamp: -1, LeaderEpoch: 3}, lo)
			continue
		}
		require.ErrorIs(t, err, tc.want, "epoch %d", tc.epoch)
		require.Empty(t, res.Batches)
		require.Equal(t, [3]int64{-1, -1, -1}, [3]int64{res.HighWatermark, res.LastStable, res.LogStart})
		require.ErrorIs(t, lerr, tc.want)
		require.Equal(t, ListOffsetResult{Offset: -1, Timestamp: -1, LeaderEpoch: -1}, lo)
	}
}

// A follower fetch is refused: the partition has no followers, and Kafka
// answers a broker outside the replica set so (UNKNOWN_LEADER_EPOCH when the
// request names an epoch, for the follower to retry).
func TestFollowerFetchIsRefused(t *testing.T) {
	p, _, _ := held(t)
	_, err := p.Fetch(FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, CurrentLeaderEpoch: NoLeaderEpoch})
	require.ErrorIs(t, err, ErrNotReplica)
	_, err = p.Fetch(FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, CurrentLeaderEpoch: 3})
	require.ErrorIs(t, err, ErrUnknownLeaderEpoch)
	_, err = p.Fetch(FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, CurrentLeaderEpoch: 1})
	require.ErrorIs(t, err, ErrFencedLeaderEpoch, "the epoch is checked first, as in Kafka")
}

// ListOffsets answers what the isolation level can read: latest is its
// bound, and a record found for a time or the largest timestamp past it is
// not reported yet.
func TestListOffsetStopsAtTheIsolationBound(t *testing.T) {
	p, hw, _ := held(t)
	for _, iso := range []IsolationLevel{ReadUncommitted, ReadCommitted} {
		lo, err := p.ListOffset(ListOffsetParams{Timestamp: ListLatest, Isolation: iso, CurrentLeaderEpoch: NoLeaderEpoch})
		require.NoError(t, err)
		require.Equal(t, hw, lo.Offset)
		lo, err = p.ListOffset(ListOffsetParams{Timestamp: 1000, Isolation: iso, CurrentLeaderEpoch: NoLeaderEpoch})
		require.NoError(t, err)
		require.Equal(t, ListOffsetResult{Offset: 0, Timestamp: 1000, LeaderEpoch: 3}, lo, "the first record at 1000")
		for _, ts := range []int64{1001, ListMaxTimestamp} {
			lo, err = p.ListOffset(ListOffsetParams{Timestamp: ts, Isolation: iso, CurrentLeaderEpoch: NoLeaderEpoch})
			require.NoError(t, err)
			require.Equal(t, ListOffsetResult{Offset: -1, Timestamp: -1, LeaderEpoch: 3}, lo,
				"timestamp %d: the record at 2000 is past the bound", ts)
		}
	}
}
