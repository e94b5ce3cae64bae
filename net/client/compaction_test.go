package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/protoext"
	"github.com/moonmq/moonmq/node"
)

func TestPolicyCompacts(t *testing.T) {
	for policy, want := range map[string]bool{
		"compact": true, "compact,delete": true, "delete,compact": true, "delete, compact": true,
		"delete": false, "": false, "compaction": false,
	} {
		require.Equal(t, want, PolicyCompacts(policy), policy)
	}
}

// Against Kafka (kfake stands in for it) the cleanup policy is listed and
// a compacted topic is recognised, but its cleaning state is unknown:
// Kafka keeps it in broker metrics, off the wire.
func TestCompactedTopicWithoutCleanerState(t *testing.T) {
	requireKfake(t)
	cl := newTestClient(t)
	ctx := testCtx(t)
	require.NoError(t, cl.CreateTopic(ctx, "table", 2, 1, map[string]string{"cleanup.policy": "compact"}))
	require.NoError(t, cl.CreateTopic(ctx, "stream", 1, 1, nil))
	_, err := cl.Produce(ctx, "table", []Record{{Partition: 0, Key: []byte("k"), Value: []byte("v")}})
	require.NoError(t, err)

	topics, err := cl.ListTopics(ctx)
	require.NoError(t, err)
	table, _ := findTopic(topics, "table")
	stream, _ := findTopic(topics, "stream")
	require.Equal(t, "compact", table.CleanupPolicy)
	require.True(t, table.Compacted())
	require.Equal(t, "delete", stream.CleanupPolicy)
	require.False(t, stream.Compacted())
	require.Equal(t, float64(-1), table.DirtyRatio)

	d, err := cl.DescribeTopic(ctx, "table")
	require.NoError(t, err)
	require.True(t, d.Compacted())
	for _, p := range d.Partitions {
		require.Nil(t, p.Compaction)
	}
}

// The compaction tag is read from the leader's DescribeLogDirs answer; a
// value that does not parse (a newer broker's) is left out, not misread,
// and does not hide the size or the health beside it.
func TestFindReplicaReadsTheCompactionTag(t *testing.T) {
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	dir := kmsg.NewDescribeLogDirsResponseDir()
	topic := kmsg.NewDescribeLogDirsResponseDirTopic()
	topic.Topic = "t"
	want := protoext.PartitionCompaction{DirtyRatio: 0.25, DirtyBytes: 100, Cleanings: 3, LastCleanedMs: 1_767_225_600_000, LastDurationMs: 12}
	for p, tag := range [][]byte{want.Append(nil), {9, 9, 9}} {
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = int32(p), 1000
		dp.UnknownTags.Set(protoext.PartitionHealthTag, protoext.PartitionHealth{}.Append(nil))
		dp.UnknownTags.Set(protoext.PartitionCompactionTag, tag)
		topic.Partitions = append(topic.Partitions, dp)
	}
	dir.Topics = append(dir.Topics, topic)
	resp.Dirs = append(resp.Dirs, dir)

	rd, ok := findReplica(resp, "t", 0)
	require.True(t, ok)
	require.Equal(t, &want, rd.compaction)
	require.Equal(t, &Compaction{DirtyRatio: 0.25, DirtyBytes: 100, Cleanings: 3,
		LastCleaned: time.UnixMilli(1_767_225_600_000), LastDuration: 12 * time.Millisecond}, compactionOf(*rd.compaction))
	rd, ok = findReplica(resp, "t", 1)
	require.True(t, ok)
	require.Nil(t, rd.compaction)
	require.NotNil(t, rd.health)
	require.Equal(t, int64(1000), rd.size)
}

// Against a MoonMQ node, a compacted topic's partitions carry the log
// cleaner's state once it has looked at them, and a cleaning shows: its
// count, when it ended, a dirty ratio back under the topic's minimum. A
// topic that is not compacted carries none.
func TestCompactionStateFromMoonMQ(t *testing.T) {
	n := testnode.Start(t, node.Config{Cleaner: &cleaner.Options{Threads: 1, Backoff: 20 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := Dial(ctx, Options{Addr: n.Addr().String(), RequestTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic(ctx, "table", 2, 1, map[string]string{"cleanup.policy": "compact",
		"segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}))
	require.NoError(t, cl.CreateTopic(ctx, "stream", 1, 1, nil))

	start := time.Now()
	// Ten keys rewritten twenty times in partition 0: many rolled
	// segments, most of their records superseded. Partition 1 gets
	// nothing: nothing to clean there, ever.
	for r := range 20 {
		recs := make([]Record, 10)
		for k := range recs {
			recs[k] = Record{Partition: 0, Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d-%d", k, r)}
		}
		_, err := cl.Produce(ctx, "table", recs)
		require.NoError(t, err)
	}
	_, err = cl.Produce(ctx, "stream", []Record{{Partition: 0, Value: []byte("x")}})
	require.NoError(t, err)

	var d TopicDescription
	for {
		d, err = cl.DescribeTopic(ctx, "table")
		require.NoError(t, err)
		if c := d.Partitions[0].Compaction; c != nil && c.Cleanings > 0 && d.Partitions[1].Compaction != nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no cleaning reported: %+v", d.Partitions)
		case <-time.After(20 * time.Millisecond):
		}
	}
	end := time.Now()
	require.True(t, d.Compacted())
	c := d.Partitions[0].Compaction
	require.GreaterOrEqual(t, c.DirtyRatio, 0.0)
	require.LessOrEqual(t, c.DirtyRatio, 1.0)
	require.GreaterOrEqual(t, c.DirtyBytes, int64(0))
	require.False(t, c.LastCleaned.Before(start.Truncate(time.Millisecond)), "last cleaned %s, test started %s", c.LastCleaned, start)
	require.False(t, c.LastCleaned.After(end), "last cleaned %s, after the answer", c.LastCleaned)
	require.GreaterOrEqual(t, c.LastDuration, time.Duration(0))
	require.Empty(t, c.Uncleanable)
	idle := d.Partitions[1].Compaction
	require.Zero(t, idle.Cleanings)
	require.True(t, idle.LastCleaned.IsZero(), "never cleaned")
	require.Zero(t, idle.DirtyBytes, "an empty partition has nothing to clean")

	s, err := cl.DescribeTopic(ctx, "stream")
	require.NoError(t, err)
	require.False(t, s.Compacted())
	require.Nil(t, s.Partitions[0].Compaction, "no compaction state for a topic that is not compacted")

	topics, err := cl.ListTopics(ctx)
	require.NoError(t, err)
	table, _ := findTopic(topics, "table")
	stream, _ := findTopic(topics, "stream")
	require.Equal(t, "compact", table.CleanupPolicy)
	require.GreaterOrEqual(t, table.DirtyRatio, 0.0, "the largest of the partitions' dirty ratios")
	require.Equal(t, "delete", stream.CleanupPolicy)
	require.Equal(t, float64(-1), stream.DirtyRatio)
}
