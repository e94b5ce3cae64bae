package client

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A Membership is a live member: it holds the assignment, the group is not
// empty (admin resets are refused), its commits are accepted, and Leave
// empties the group.
func TestMembership(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "member")
	group := uniqueTopic(t, "members")
	require.NoError(t, cl.CreateTopic(ctx, topic, 2, 1, nil))

	m, err := cl.JoinGroup(ctx, group, topic)
	require.NoError(t, err)
	t.Cleanup(m.Leave)
	require.Equal(t, group, m.Group())
	require.Equal(t, []string{topic}, m.Topics())
	require.NotEmpty(t, m.MemberID())
	require.Equal(t, []TopicPartitions{{Topic: topic, Partitions: []int32{0, 1}}}, m.Assigned())
	require.Equal(t, []int32{0, 1}, m.AssignedPartitions(topic))
	require.Empty(t, m.AssignedPartitions("other"))

	d := describeUntil(t, cl, group, func(d GroupDescription) bool { return len(d.Members) == 1 })
	require.Equal(t, m.MemberID(), d.Members[0].ID)

	_, err = cl.ResetGroup(ctx, group, topic, Earliest())
	require.ErrorIs(t, err, ErrGroupActive, "the member keeps the group non-empty")

	require.NoError(t, m.Commit(ctx, topic, map[int32]int64{0: 0, 1: 0}))
	require.NoError(t, m.Commit(ctx, topic, nil), "nothing to commit is not an error")
	require.ErrorIs(t, m.Commit(ctx, topic, map[int32]int64{0: -1}), ErrInvalidArgument)
	d = describeUntil(t, cl, group, func(d GroupDescription) bool {
		o := groupOffsets(d)
		return o[0].Committed == 0 && o[1].Committed == 0
	})
	require.Equal(t, m.MemberID(), groupOffsets(d)[1].MemberID)

	m.Leave()
	m.Leave() // idempotent
	require.ErrorIs(t, m.Commit(ctx, topic, map[int32]int64{0: 0}), ErrClosed)
	// Members go at once; a broker may pass through a rebalance before
	// the group is Empty and takes admin commits again.
	describeUntil(t, cl, group, func(d GroupDescription) bool {
		return len(d.Members) == 0 && d.State == GroupStateEmpty
	})
	_, err = cl.ResetGroup(ctx, group, topic, Earliest())
	require.NoError(t, err, "the group is empty once the member left")
}

func TestJoinGroupInvalid(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)

	_, err := cl.JoinGroup(ctx, "", "t")
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = cl.JoinGroup(ctx, "g")
	require.ErrorIs(t, err, ErrInvalidArgument)

	missing := uniqueTopic(t, "missing")
	_, err = cl.JoinGroup(ctx, "g", missing)
	require.ErrorIs(t, err, ErrNotFound, "a member would wait for the topic forever")
	require.Equal(t, "topic '"+missing+"' does not exist", err.Error())
	require.Equal(t, "topic '"+missing+"' does not exist", Explain(err))

	cl.Close()
	_, err = cl.JoinGroup(ctx, "g", "t")
	require.ErrorIs(t, err, ErrClosed)
}

func TestMergeRemoveParts(t *testing.T) {
	require.Equal(t, []int32{0, 1, 2, 5}, mergeParts([]int32{2, 0}, []int32{5, 1, 2}))
	require.Equal(t, []int32{}, mergeParts(nil, nil))
	require.Equal(t, []int32{2, 0}, removeParts([]int32{2, 1, 0}, []int32{1, 7}))
	require.Nil(t, removeParts([]int32{1}, []int32{1}))
}
