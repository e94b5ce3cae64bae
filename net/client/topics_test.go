package client

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func findTopic(ts []TopicInfo, name string) (TopicInfo, bool) {
	for _, ti := range ts {
		if ti.Name == name {
			return ti, true
		}
	}
	return TopicInfo{}, false
}

func TestTopicLifecycle(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	name := uniqueTopic(t, "orders")

	require.NoError(t, cl.CreateTopic(ctx, name, 3, 1, map[string]string{"retention.ms": "3600000"}))

	// Creating again fails with a clear, classified error.
	err := cl.CreateTopic(ctx, name, 3, 1, nil)
	require.ErrorIs(t, err, ErrExists)
	require.ErrorIs(t, err, kerr.TopicAlreadyExists)
	require.Equal(t, "TOPIC_ALREADY_EXISTS", ErrorName(err))
	require.Equal(t, "topic '"+name+"' already exists", Explain(err))
	// The message is one sentence: no operation, code name or broker
	// message repeating it.
	require.Equal(t, "topic '"+name+"' already exists", err.Error())

	topics, err := cl.ListTopics(ctx)
	require.NoError(t, err)
	ti, ok := findTopic(topics, name)
	require.True(t, ok, "listed topics: %+v", topics)
	require.Equal(t, 3, ti.Partitions)
	require.Equal(t, 1, ti.Replicas)
	require.False(t, ti.Internal)
	require.Equal(t, int64(0), ti.Records)
	for i := 1; i < len(topics); i++ {
		require.Less(t, topics[i-1].Name, topics[i].Name, "sorted by name")
	}

	_, err = cl.Produce(ctx, name, []Record{
		{Partition: 0, Value: []byte("a")},
		{Partition: 0, Value: []byte("b")},
		{Partition: 2, Value: []byte("c")},
	})
	require.NoError(t, err)

	topics, err = cl.ListTopics(ctx)
	require.NoError(t, err)
	ti, _ = findTopic(topics, name)
	require.Equal(t, int64(3), ti.Records)
	if ti.Bytes != -1 { // DescribeLogDirs is optional
		require.Positive(t, ti.Bytes)
	}

	desc, err := cl.DescribeTopic(ctx, name)
	require.NoError(t, err)
	require.Equal(t, name, desc.Name)
	require.Len(t, desc.Partitions, 3)
	require.Equal(t, int64(3), desc.Records())
	for i, p := range desc.Partitions {
		require.Equal(t, int32(i), p.Partition)
		require.GreaterOrEqual(t, p.Leader, int32(0))
		require.Len(t, p.Replicas, 1)
		require.Equal(t, p.Replicas, p.ISR)
		require.Equal(t, int64(0), p.LogStart)
		require.NoError(t, p.Err)
	}
	require.Equal(t, int64(2), desc.Partitions[0].HighWatermark)
	require.Equal(t, int64(0), desc.Partitions[1].HighWatermark)
	require.Equal(t, int64(1), desc.Partitions[2].HighWatermark)
	rc, ok := desc.Config("retention.ms")
	require.True(t, ok, "configs: %+v", desc.Configs)
	require.Equal(t, "3600000", rc.Value)
	require.Equal(t, "topic", rc.Source)
	require.False(t, rc.Default)

	// Alter: set one key, revert another.
	require.NoError(t, cl.AlterTopicConfigs(ctx, name, map[string]string{"cleanup.policy": "compact"}, []string{"retention.ms"}))
	desc, err = cl.DescribeTopic(ctx, name)
	require.NoError(t, err)
	cp, ok := desc.Config("cleanup.policy")
	require.True(t, ok)
	require.Equal(t, "compact", cp.Value)
	require.False(t, cp.Default)
	if rc, ok := desc.Config("retention.ms"); ok {
		require.True(t, rc.Default, "retention.ms reverted: %+v", rc)
	}
	require.NoError(t, cl.AlterTopicConfigs(ctx, name, nil, nil), "empty alter is a no-op")
	require.ErrorIs(t, cl.AlterTopicConfigs(ctx, name, map[string]string{"a": "1"}, []string{"a"}), ErrInvalidArgument)

	require.NoError(t, cl.AddPartitions(ctx, name, 2))
	desc, err = cl.DescribeTopic(ctx, name)
	require.NoError(t, err)
	require.Len(t, desc.Partitions, 5)
	require.ErrorIs(t, cl.AddPartitions(ctx, name, 0), ErrInvalidArgument)

	// The producer sees the new partitions right away.
	out, err := cl.Produce(ctx, name, []Record{{Partition: 4, Value: []byte("new")}})
	require.NoError(t, err)
	require.Equal(t, int32(4), out[0].Partition)

	require.NoError(t, cl.DropTopic(ctx, name))
	topics, err = cl.ListTopics(ctx)
	require.NoError(t, err)
	_, ok = findTopic(topics, name)
	require.False(t, ok)

	// Re-creating right after a drop works.
	require.NoError(t, cl.CreateTopic(ctx, name, 1, -1, nil))
	require.NoError(t, cl.DropTopic(ctx, name))
}

func TestTopicNotFound(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	const name = "no-such-topic"

	_, err := cl.DescribeTopic(ctx, name)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	require.Equal(t, "UNKNOWN_TOPIC_OR_PARTITION", ErrorName(err))
	require.Equal(t, "topic 'no-such-topic' does not exist", Explain(err))

	err = cl.DropTopic(ctx, name)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, cl.AddPartitions(ctx, name, 1), ErrNotFound)
	require.ErrorIs(t, cl.AlterTopicConfigs(ctx, name, map[string]string{"retention.ms": "1"}, nil), ErrNotFound)
	_, err = cl.ListOffsets(ctx, name)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = cl.Read(ctx, ReadRequest{Topic: name})
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "topic 'no-such-topic' does not exist", Explain(err))
}

func TestCreateTopicInvalid(t *testing.T) {
	cl := newTestClient(t)
	ctx := testCtx(t)
	require.ErrorIs(t, cl.CreateTopic(ctx, "", 1, 1, nil), ErrInvalidArgument)
	require.ErrorIs(t, cl.CreateTopic(ctx, "x", 0, 1, nil), ErrInvalidArgument)
	require.ErrorIs(t, cl.CreateTopic(ctx, "x", 1, 0, nil), ErrInvalidArgument)
	requireKfake(t)
	// kfake has one broker: three replicas cannot be placed.
	err := cl.CreateTopic(ctx, uniqueTopic(t, "rf"), 1, 3, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, "INVALID_REPLICATION_FACTOR", ErrorName(err))
}

// A minimal broker (no DescribeLogDirs, DescribeConfigs or InitProducerID,
// as early MoonMQ) still supports listing, describing and producing; the
// optional columns are reported as unknown.
func TestMinimalBroker(t *testing.T) {
	requireKfake(t)
	vs := kversion.Stable()
	for _, key := range []int16{
		kmsg.DescribeLogDirs.Int16(), kmsg.DescribeConfigs.Int16(), kmsg.InitProducerID.Int16(),
	} {
		vs.SetMaxKeyVersion(key, -1)
	}
	cl := newTestClient(t, kfake.MaxVersions(vs))
	ctx := testCtx(t)
	require.NoError(t, cl.CreateTopic(ctx, "minimal", 2, 1, nil))
	_, err := cl.Produce(ctx, "minimal", []Record{{Partition: 1, Value: []byte("v")}})
	require.NoError(t, err)

	topics, err := cl.ListTopics(ctx)
	require.NoError(t, err)
	ti, ok := findTopic(topics, "minimal")
	require.True(t, ok)
	require.Equal(t, int64(1), ti.Records)
	require.Equal(t, int64(-1), ti.Bytes)
	require.Empty(t, ti.CleanupPolicy, "no DescribeConfigs: the policy is unknown")
	require.Equal(t, float64(-1), ti.DirtyRatio)

	desc, err := cl.DescribeTopic(ctx, "minimal")
	require.NoError(t, err)
	require.Nil(t, desc.Configs)
	require.Equal(t, int64(-1), desc.Partitions[1].Bytes)
	require.Equal(t, int64(1), desc.Partitions[1].HighWatermark)
}
