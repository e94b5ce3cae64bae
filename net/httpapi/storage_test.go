package httpapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/replica"
)

// A follower's lag is exported per partition while it follows and has
// heard from its leader, with the node's maximum; the series goes when the
// replica leads or its topic is deleted. /stats carries the same lag.
func TestFollowerLagSeries(t *testing.T) {
	b, err := replica.Open(replica.Options{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	tp := replica.TopicPartition{Topic: "f", Partition: 1}
	p, err := b.EnsurePartition(tp, nil)
	require.NoError(t, err)
	_, err = b.EnsurePartition(replica.TopicPartition{Topic: "f", Partition: 0}, nil)
	require.NoError(t, err)
	c := NewPartitionCollector(b)

	got := gather(t, c)
	require.NotContains(t, got, "moonmq_partition_follower_lag{partition=1,topic=f}")
	require.Equal(t, float64(0), got["moonmq_follower_max_lag"])
	stats := TopicStatsOf(b)
	require.Equal(t, int32(-1), stats[0].Partitions[1].Leader, "no metadata given: no leader")
	require.Nil(t, stats[0].Partitions[1].FollowerLag)

	require.NoError(t, p.BecomeFollower(1, 2))
	recs := []batch.Record{{OffsetDelta: 0, Value: []byte("a")}, {OffsetDelta: 1, Value: []byte("b")}}
	data := batch.Build(batch.Header{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: 1, MaxTimestamp: 1}, recs)
	batch.SetPartitionLeaderEpoch(data, 1)
	res, err := p.AppendAsFollower(data)
	require.NoError(t, err)
	require.NoError(t, p.WaitDurable(context.Background(), res))
	p.SetFollowerHighWatermark(9)
	got = gather(t, c)
	require.Equal(t, float64(7), got["moonmq_partition_follower_lag{partition=1,topic=f}"], "HW 9, durable end 2")
	require.NotContains(t, got, "moonmq_partition_follower_lag{partition=0,topic=f}", "partition 0 follows nobody")
	require.Equal(t, float64(7), got["moonmq_follower_max_lag"])
	stats = TopicStatsOf(b)
	require.NotNil(t, stats[0].Partitions[1].FollowerLag)
	require.Equal(t, int64(7), *stats[0].Partitions[1].FollowerLag)

	require.NoError(t, p.BecomeLeader(2, nil))
	got = gather(t, c)
	require.NotContains(t, got, "moonmq_partition_follower_lag{partition=1,topic=f}", "a leader lags nobody")
	require.Equal(t, float64(0), got["moonmq_follower_max_lag"])

	require.NoError(t, p.BecomeFollower(3, 2))
	p.SetFollowerHighWatermark(4)
	require.Contains(t, gather(t, c), "moonmq_partition_follower_lag{partition=1,topic=f}")
	require.NoError(t, b.DeleteTopic("f"))
	got = gather(t, c)
	require.NotContains(t, got, "moonmq_partition_follower_lag{partition=1,topic=f}", "gone with its topic")
	require.NotContains(t, got, "moonmq_partition_log_end_offset{partition=1,topic=f}")
}
