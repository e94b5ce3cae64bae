package group

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/coord/coordtest"
)

// TestRestartBetweenJoinAndSync: a broker restart after a rebalance's
// JoinGroup round but before the leader's SyncGroup must not leave the
// group Stable on the previous assignments: the members of the unfinished
// generation are sent back to rejoin.
func TestRestartBetweenJoinAndSync(t *testing.T) {
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
	s := get(t, c.SyncGroup(SyncRequest{Group: "g", Generation: ja.Generation, MemberID: ja.MemberID,
		Assignments: map[string][]byte{ja.MemberID: []byte("A-all")}}))
	require.NoError(t, s.Err)

	// B joins: both rejoin into generation 2, then the broker stops.
	rb := joinReq("", "b")
	rb.Version = 3
	chb := c.JoinGroup(rb)
	ra2 := joinReq(ja.MemberID, "a")
	ra2.Version = 3
	cha2 := c.JoinGroup(ra2)
	ja2, jb := get(t, cha2), get(t, chb)
	require.NoError(t, ja2.Err)
	require.NoError(t, jb.Err)
	require.Equal(t, ja.Generation+1, ja2.Generation)
	require.NoError(t, c.Close())

	c2 := startCoordinator(t, store, clk, testTopics)
	sb := get(t, c2.SyncGroup(SyncRequest{Group: "g", Generation: jb.Generation, MemberID: jb.MemberID}))
	require.Error(t, sb.Err, "a member of the unfinished generation must not get an assignment")
	sa := get(t, c2.SyncGroup(SyncRequest{Group: "g", Generation: ja2.Generation, MemberID: ja2.MemberID,
		Assignments: map[string][]byte{ja2.MemberID: []byte("A-half"), jb.MemberID: []byte("B-half")}}))
	require.ErrorIs(t, sa.Err, ErrIllegalGeneration)
	require.Error(t, get(t, c2.Heartbeat(HeartbeatRequest{Group: "g", Generation: ja2.Generation, MemberID: ja2.MemberID})))
}

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
