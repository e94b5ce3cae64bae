package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/cleaner"
	"github.com/moonmq/moonmq/net/protoext"
	"github.com/moonmq/moonmq/node"
)

// A compacted topic refuses records without a key with INVALID_RECORD, as
// Kafka's LogValidator does, whatever the codec; a delete topic takes them;
// the policy is read at produce time, so altering it applies at once.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	s := startServer(t, node.Config{})
	ctx := context.Background()
	_, adm := adminClient(t, s)
	compact := "compact"
	_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "table")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "stream")
	require.NoError(t, err)

	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1))
		require.NoError(t, err)

		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Value: []byte("no key")}).FirstErr()
		require.ErrorIs(t, err, kerr.InvalidRecord, "codec %v", codec)
		// An empty key is a key (Kafka's Record.hasKey).
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Key: []byte{}, Value: []byte("empty key")}).FirstErr())
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Key: []byte("k"), Value: []byte("v")}).FirstErr())
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "stream", Value: []byte("no key is fine here")}).FirstErr())
		cl.Close()
	}

	// Altered at run time: the next produce sees the new policy.
	del := "delete"
	_, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &del}}, "table")
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.RecordRetries(1))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Value: []byte("keyless, now allowed")}).FirstErr())
	both := "delete,compact"
	_, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: &both}}, "table")
	require.NoError(t, err)
	require.ErrorIs(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Value: []byte("refused again")}).FirstErr(), kerr.InvalidRecord)
}

// The refusal names each keyless record (Produce v8+ RecordErrors, KIP-467)
// with Kafka's messages, and nothing of the batch is stored.
func TestCompactedTopicRecordErrors(t *testing.T) {
	s := startServer(t, node.Config{})
	ctx := context.Background()
	_, adm := adminClient(t, s)
	compact := "compact"
	_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "t")
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()

	recs := []batch.Record{
		{OffsetDelta: 0, Key: []byte("a"), Value: []byte("1")},
		{OffsetDelta: 1, Value: []byte("keyless")},
		{OffsetDelta: 2, Key: []byte("b"), Value: []byte("2")},
		{OffsetDelta: 3, Value: []byte("keyless too")},
	}
	h := batch.Header{Magic: batch.Magic, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastOffsetDelta: 3, NumRecords: 4}
	plain := batch.Build(h, recs)
	zstd, err := batch.Recompress(plain, batch.CompressionZstd, 3, 1<<20)
	require.NoError(t, err)
	for _, b := range [][]byte{plain, zstd} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		p := resp.Topics[0].Partitions[0]
		require.Equal(t, kerr.InvalidRecord.Code, p.ErrorCode)
		msg := "Compacted topic cannot accept message without key in topic partition t-0"
		require.Len(t, p.ErrorRecords, 2)
		for i, want := range []int32{1, 3} {
			require.Equal(t, want, p.ErrorRecords[i].RelativeOffset)
			require.Equal(t, msg, *p.ErrorRecords[i].ErrorMessage)
		}
		require.NotNil(t, p.ErrorMessage)
		require.Equal(t, fmt.Sprintf("One or more records have been rejected due to 2 record errors in total, and only "+
			"showing the first three errors at most: [RecordError(batchIndex=1, message='%s'), "+
			"RecordError(batchIndex=3, message='%s')]", msg, msg), *p.ErrorMessage)
	}
	require.Zero(t, highWatermark(t, s, "t"), "a refused batch stores nothing")
}

// DescribeLogDirs carries the log cleaner's state of a compacted topic's
// partitions in MoonMQ's compaction tag once the cleaner has looked at
// them, and none for a topic that is not
// compacted; stock clients (kadm) still read the standard fields.
func TestDescribeLogDirsReportsCompaction(t *testing.T) {
	s := startServer(t, node.Config{Cleaner: &cleaner.Options{Threads: 1, Backoff: 20 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, adm := adminClient(t, s)
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"} {
		configs[k] = &v
	}
	_, err := adm.CreateTopic(ctx, 1, 1, configs, "table")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "stream")
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	for i := range 200 {
		r := &kgo.Record{Topic: "table", Key: fmt.Appendf(nil, "k%d", i%10), Value: fmt.Appendf(nil, "v%d", i)}
		require.NoError(t, cl.ProduceSync(ctx, r, &kgo.Record{Topic: "stream", Value: []byte("x")}).FirstErr())
	}

	// tags returns each topic's partition 0 compaction tag (kgo asks at
	// the highest version, a flexible one).
	tags := func() map[string][]byte {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		out := map[string][]byte{}
		for _, d := range resp.Dirs {
			for _, tp := range d.Topics {
				for _, p := range tp.Partitions {
					p.UnknownTags.Each(func(tag uint32, b []byte) {
						if tag == protoext.PartitionCompactionTag && p.Partition == 0 {
							out[tp.Topic] = b
						}
					})
				}
			}
		}
		return out
	}
	var state protoext.PartitionCompaction
	for {
		if b, ok := tags()["table"]; ok {
			state, err = protoext.ParsePartitionCompaction(b)
			require.NoError(t, err)
			if state.Cleanings > 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no cleaning reported; last state %+v", state)
		case <-time.After(20 * time.Millisecond):
		}
	}
	require.Positive(t, state.LastCleanedMs)
	require.GreaterOrEqual(t, state.LastDurationMs, int64(0))
	require.Empty(t, state.Uncleanable)
	require.NotContains(t, tags(), "stream", "a topic that is not compacted has no compaction state")

	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	require.NoError(t, err)
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "table" {
				size = p.Size
			}
		})
	})
	require.Positive(t, size)
}
