package group

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/coord/coordtest"
)

// TestBadConsumerHeartbeatLeavesClassicGroupAlone: an invalid KIP-848
// heartbeat, or a leave, aimed at an empty classic group fails without
// converting the group (and without tombstoning its metadata).
func TestBadConsumerHeartbeatLeavesClassicGroupAlone(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics)
	require.NoError(t, c.EnsureTopic(context.Background()))
	ra := joinReq("", "a")
	ra.Version = 3
	cha := c.JoinGroup(ra)
	c.Tick(clk.add(4 * time.Second))
	ja := get(t, cha)
	require.NoError(t, ja.Err)
	require.NoError(t, get(t, c.SyncGroup(SyncRequest{Group: "g", Generation: ja.Generation, MemberID: ja.MemberID,
		Assignments: map[string][]byte{ja.MemberID: []byte("A")}})).Err)
	for _, errs := range commit(c, "g", ja.Generation, ja.MemberID, map[int32]int64{0: 5}) {
		for _, err := range errs {
			require.NoError(t, err)
		}
	}
	require.NoError(t, get(t, c.LeaveGroup("g", []LeaveMember{{MemberID: ja.MemberID}})).Err)
	c.Tick(clk.add(time.Minute)) // the rebalance without members completes
	require.Equal(t, StateEmpty, c.DescribeGroups([]string{"g"})[0].State)

	bad := "("
	require.Error(t, get(t, c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 1, MemberEpoch: 0, SubscribedTopicRegex: &bad})).Err)
	require.ErrorIs(t, get(t, c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", Version: 1, MemberID: "x", MemberEpoch: -1})).Err, ErrUnknownMemberID)
	d := c.DescribeGroups([]string{"g"})[0]
	require.NoError(t, d.Err, "the group is still a classic group")
	require.Equal(t, "consumer", d.ProtocolType)
}

// Offsets of a simple group (offsets only, no protocol type: a consumer
// assigning itself partitions, an admin tool) expire by their commit time
// alone, as in Kafka; a restart, which rebuilds the group from the offset
// records at its own time, must not push their expiry back.
func TestSimpleGroupOffsetsExpireByCommitTimeAcrossRestarts(t *testing.T) {
	store := coordtest.NewMemLog()
	clk := &clock{now: time.Unix(1_000_000, 0)}
	c := startCoordinator(t, store, clk, testTopics) // retention 1 h
	require.NoError(t, c.EnsureTopic(context.Background()))
	require.NoError(t, commit(c, "simple", -1, "", map[int32]int64{0: 5})[0][0])
	c.Tick(clk.add(40 * time.Minute))
	require.NoError(t, commit(c, "simple", -1, "", map[int32]int64{1: 6})[0][0])
	c.Tick(clk.add(10 * time.Minute))
	require.NoError(t, c.Close())

	c = startCoordinator(t, store, clk, testTopics)
	c.Tick(clk.add(11 * time.Minute)) // t/0 committed 61 minutes ago, t/1 21
	got := fetched(t, c, "simple")
	require.NotContains(t, got, "t/0", "expired an hour after its commit, the restart notwithstanding")
	require.EqualValues(t, 6, got["t/1"].Offset)
	c.Tick(clk.add(40 * time.Minute))
	require.Empty(t, fetched(t, c, "simple"))

	// Gone for good: the expiry wrote tombstones.
	require.NoError(t, c.Close())
	c = startCoordinator(t, store, clk, testTopics)
	require.Empty(t, fetched(t, c, "simple"))
	ls, err := c.ListGroups(nil, nil)
	require.NoError(t, err)
	require.Empty(t, ls)
}
