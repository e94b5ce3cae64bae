package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSentinels: each refusal matches its sentinel with errors.Is, which
// is how the protocol layer will map them to Kafka error codes.
func TestSentinels(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := New(1, time.Second)
	require.ErrorIs(t, l.Appended(1), ErrNotLeader)
	require.ErrorIs(t, l.Become(now, LeaderState{Replicas: []int32{2}, ISR: []int32{2}, MinISR: 1}), ErrInvalidState)
	require.NoError(t, l.Become(now, LeaderState{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LeaderEpoch: 3, MinISR: 2, LogEnd: 5}))
	for _, c := range []struct {
		replica int32
		offset  int64
		epoch   int32
		want    error
	}{
		{7, 0, 3, ErrUnknownReplica},
		{2, 0, 2, ErrFencedLeaderEpoch},
		{2, 0, 4, ErrUnknownLeaderEpoch},
		{2, 6, 3, ErrOffsetOutOfRange},
	} {
		require.ErrorIs(t, l.FollowerFetched(now, c.replica, c.offset, c.epoch), c.want)
	}
	require.ErrorIs(t, l.AlterPartitionResult(Result{Accepted: true}), ErrNoPendingChange)
	require.ErrorIs(t, l.Become(now, LeaderState{Replicas: []int32{1, 2}, ISR: []int32{1}, LeaderEpoch: 2, MinISR: 1}), ErrStaleState)
	require.NoError(t, l.Tick(now.Add(2*time.Second))) // 2 never fetched: proposed out
	require.NoError(t, l.AlterPartitionResult(Result{Accepted: true, ISR: []int32{1}, LeaderEpoch: 3, PartitionEpoch: 1}))
	require.ErrorIs(t, l.CanAppend(), ErrNotEnoughReplicas)
	require.NoError(t, l.Appended(5))
	ok, err := l.Ready(5)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrNotEnoughReplicasAfterAppend)
	require.False(t, errors.Is(err, ErrNotEnoughReplicas), "the two acks=all refusals are distinct codes")
}
