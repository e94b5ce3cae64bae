package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

func groupOffsets(d GroupDescription) map[int32]GroupOffset {
	out := map[int32]GroupOffset{}
	for _, o := range d.Offsets {
		out[o.Partition] = o
	}
	return out
}

func TestGroupLifecycle(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "grouped")
	group := uniqueTopic(t, "billing")
	seedTopic(t, cl, topic, 2, 4, time.Now()) // 8 records, 4 per partition

	// A group consumer commits what the callback accepted.
	got := collect(t, cl, topic, group, Earliest(), 8)
	require.Len(t, got, 8)

	groups, err := cl.ListGroups(ctx)
	require.NoError(t, err)
	var found bool
	for _, g := range groups {
		if g.Name == group {
			found = true
			require.Equal(t, "consumer", g.ProtocolType)
		}
	}
	require.True(t, found, "groups: %+v", groups)

	// After the consumer left, the group is Empty with its commits.
	d := describeUntil(t, cl, group, func(d GroupDescription) bool {
		return len(d.Members) == 0 && d.TotalLag == 0 && len(d.Offsets) == 2
	})
	require.Equal(t, GroupStateEmpty, d.State)
	for p, o := range groupOffsets(d) {
		require.Equal(t, topic, o.Topic)
		require.Equal(t, int64(4), o.Committed, "partition %d", p)
		require.Equal(t, int64(4), o.End)
		require.Equal(t, int64(0), o.Lag)
		require.NoError(t, o.Err)
	}

	// Reset to the start: lag becomes the whole log.
	reset, err := cl.ResetGroup(ctx, group, topic, Earliest())
	require.NoError(t, err)
	require.Len(t, reset, 2)
	for _, o := range reset {
		require.Equal(t, int64(0), o.Committed)
		require.Equal(t, int64(4), o.Lag)
	}
	d, err = cl.DescribeGroup(ctx, group)
	require.NoError(t, err)
	require.Equal(t, int64(8), d.TotalLag)

	// Reset every committed topic to one before the end.
	reset, err = cl.ResetGroup(ctx, group, "", FromEnd(1))
	require.NoError(t, err)
	require.Len(t, reset, 2)
	for _, o := range reset {
		require.Equal(t, int64(3), o.Committed)
	}

	require.NoError(t, cl.CommitOffset(ctx, group, topic, 1, 2))
	d, err = cl.DescribeGroup(ctx, group)
	require.NoError(t, err)
	offs := groupOffsets(d)
	require.Equal(t, int64(3), offs[0].Committed)
	require.Equal(t, int64(2), offs[1].Committed)
	require.Equal(t, int64(2), offs[1].Lag)
	require.Equal(t, int64(3), d.TotalLag)

	// A consumer resumes from the committed offsets.
	got = collect(t, cl, topic, group, Earliest(), 3)
	require.ElementsMatch(t, []string{"p0-3", "p1-2", "p1-3"}, values(got))

	require.NoError(t, cl.DeleteGroup(ctx, group))
	_, err = cl.DescribeGroup(ctx, group)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "group '"+group+"' does not exist", Explain(err))
}

// describeUntil polls DescribeGroup until cond holds (group state settles
// asynchronously after a member leaves).
func describeUntil(t *testing.T, cl *Client, group string, cond func(GroupDescription) bool) GroupDescription {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := cl.DescribeGroup(testCtx(t), group)
		if err == nil && cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s did not settle: %+v, %v", group, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGroupActiveRejectsResetAndDelete(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	topic := uniqueTopic(t, "active")
	group := uniqueTopic(t, "live")
	seedTopic(t, cl, topic, 1, 2, time.Now())

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- cl.Consume(cctx, topic, group, Earliest(), func(Record) error {
			seen <- struct{}{}
			return nil
		})
	}()
	select {
	case <-seen:
	case <-time.After(15 * time.Second):
		t.Fatal("consumer never received a record")
	}

	d, err := cl.DescribeGroup(ctx, group)
	require.NoError(t, err)
	require.Len(t, d.Members, 1)
	require.Equal(t, []TopicPartitions{{Topic: topic, Partitions: []int32{0}}}, d.Members[0].Assigned)
	require.Equal(t, d.Members[0].ID, groupOffsets(d)[0].MemberID)

	_, err = cl.ResetGroup(ctx, group, topic, Earliest())
	require.ErrorIs(t, err, ErrGroupActive)
	require.ErrorIs(t, err, kerr.NonEmptyGroup)
	require.Contains(t, Explain(err), "still has active members")

	err = cl.DeleteGroup(ctx, group)
	require.ErrorIs(t, err, ErrGroupActive)

	cancel()
	require.NoError(t, <-done)
}

func TestGroupNotFound(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	_, err := cl.DescribeGroup(ctx, "ghost")
	require.ErrorIs(t, err, ErrNotFound)
	err = cl.DeleteGroup(ctx, "ghost")
	require.ErrorIs(t, err, ErrNotFound)
	_, err = cl.DescribeGroup(ctx, "")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, cl.CommitOffset(ctx, "g", "t", 0, -5), ErrInvalidArgument)
}
