// Package e2e runs real clients (franz-go and kcat) against a real
// `moonmq serve` process on 127.0.0.1:0 (internal/testbroker), for what
// needs the process: signals, SIGKILL, descriptor limits, its logs. The
// console and the dashboard run here too, the binary on a pseudo-terminal
// and in tmux, against a broker that needs no process (internal/testnode).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(15 * time.Second)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func createTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxT(t, 10*time.Second), partitions, 1, configs, name)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// consumeAll reads every partition of topic from the start until n records arrived.
func consumeAll(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, _ := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxT(t, 30*time.Second)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(out), n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestIdempotentProduceAndConsume(t *testing.T) {
	b := testbroker.Start(t)
	cl, adm := newClient(t, b.Addr, kgo.DefaultProduceTopic("orders"))
	createTopic(t, adm, "orders", 4, nil)

	const n = 5000
	ctx := ctxT(t, 60*time.Second)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%50)), Value: []byte(fmt.Sprintf("v%d", i)),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs <- err })
	}
	for i := 0; i < n; i++ {
		require.NoError(t, <-errs)
	}

	recs := consumeAll(t, b.Addr, "orders", n)
	require.Len(t, recs, n)
	seen := map[string]bool{}
	next := map[int32]int64{}
	lastPerKey := map[string]int{}
	for _, r := range recs {
		require.False(t, seen[string(r.Value)], "duplicate %s", r.Value)
		seen[string(r.Value)] = true
		require.Equal(t, next[r.Partition], r.Offset, "offsets are dense per partition")
		next[r.Partition]++
		require.Equal(t, "h", r.Headers[0].Key)
		var i int
		fmt.Sscanf(string(r.Value), "v%d", &i)
		require.Greater(t, i+1, lastPerKey[string(r.Key)], "per-key order kept")
		lastPerKey[string(r.Key)] = i + 1
	}
	ends, err := adm.ListEndOffsets(ctx, "orders")
	require.NoError(t, err)
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	require.Equal(t, int64(n), total)
}

func TestAdminErrorsAndConfigs(t *testing.T) {
	b := testbroker.Start(t)
	_, adm := newClient(t, b.Addr)
	ctx := ctxT(t, 30*time.Second)
	createTopic(t, adm, "cfg", 2, map[string]*string{"retention.ms": kadm.StringPtr("3600000")})

	// Duplicate create and bad config get the Kafka codes.
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "cfg")
	require.ErrorIs(t, err, kerr.TopicAlreadyExists)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kadm.StringPtr("soon")}, "bad")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	_, err = adm.CreateTopic(ctx, 1, 3, nil, "rf3")
	require.ErrorIs(t, err, kerr.InvalidReplicationFactor)

	rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
	require.NoError(t, err)
	rc, err := rcs.On("cfg", nil)
	require.NoError(t, err)
	vals := map[string]string{}
	for _, c := range rc.Configs {
		vals[c.Key] = c.MaybeValue()
	}
	require.Equal(t, "3600000", vals["retention.ms"])
	require.Equal(t, "always", vals["flush.policy"])

	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: kadm.StringPtr("1048576")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, alter[0].Err)
	alter, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "no.such.key", Value: kadm.StringPtr("1")}}, "cfg")
	require.NoError(t, err)
	require.ErrorIs(t, alter[0].Err, kerr.InvalidConfig)

	cp, err := adm.CreatePartitions(ctx, 3, "cfg")
	require.NoError(t, err)
	require.NoError(t, cp["cfg"].Err)
	td, err := adm.ListTopics(ctx, "cfg")
	require.NoError(t, err)
	require.Len(t, td["cfg"].Partitions, 5)

	dr, err := adm.DeleteTopics(ctx, "cfg")
	require.NoError(t, err)
	require.NoError(t, dr["cfg"].Err)
	dr, err = adm.DeleteTopics(ctx, "cfg")
	require.NoError(t, err)
	require.ErrorIs(t, dr["cfg"].Err, kerr.UnknownTopicOrPartition)
}

func TestListOffsetsByTimeAndDeleteRecords(t *testing.T) {
	b := testbroker.Start(t)
	cl, adm := newClient(t, b.Addr, kgo.DefaultProduceTopic("times"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, adm, "times", 1, nil)
	ctx := ctxT(t, 30*time.Second)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
	lo, err := adm.ListOffsetsAfterMilli(ctx, base.Add(4*time.Minute+time.Second).UnixMilli(), "times")
	require.NoError(t, err)
	o, _ := lo.Lookup("times", 0)
	require.NoError(t, o.Err)
	require.Equal(t, int64(5), o.Offset)

	mx, err := adm.ListMaxTimestampOffsets(ctx, "times")
	require.NoError(t, err)
	o, _ = mx.Lookup("times", 0)
	require.Equal(t, int64(9), o.Offset)
	require.Equal(t, base.Add(9*time.Minute).UnixMilli(), o.Timestamp)

	del, err := adm.DeleteRecords(ctx, kadm.Offsets{"times": {0: {Topic: "times", Partition: 0, At: 4}}})
	require.NoError(t, err)
	require.NoError(t, del.Error())
	so, err := adm.ListStartOffsets(ctx, "times")
	require.NoError(t, err)
	o, _ = so.Lookup("times", 0)
	require.Equal(t, int64(4), o.Offset)

	// Reading below the log start is OFFSET_OUT_OF_RANGE; from 4 gives 4..9.
	rd, _ := newClient(t, b.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"times": {0: kgo.NewOffset().At(4)}}))
	var got []int64
	for len(got) < 6 {
		fs := rd.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	require.Equal(t, []int64{4, 5, 6, 7, 8, 9}, got)

	// Deleting past the high watermark is rejected.
	del, err = adm.DeleteRecords(ctx, kadm.Offsets{"times": {0: {Topic: "times", Partition: 0, At: 99}}})
	require.NoError(t, err)
	require.ErrorIs(t, del.Error(), kerr.OffsetOutOfRange)
}

// TestListOffsetsByTimeInCompressedBatches: a timestamp lookup that lands in
// a compressed batch answers with the exact record inside it, for every
// codec, as Kafka does.
func TestListOffsetsByTimeInCompressedBatches(t *testing.T) {
	b := testbroker.Start(t)
	_, adm := newClient(t, b.Addr)
	ctx := ctxT(t, 60*time.Second)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	codecs := map[string]kgo.CompressionCodec{
		"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		topic := "ts-" + name
		createTopic(t, adm, topic, 1, nil)
		// One batch of 10 records a minute apart (a long linger and one
		// ProduceSync of all of them keep them together).
		cl, _ := newClient(t, b.Addr, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec),
			kgo.ProducerLinger(time.Second))
		var rs []*kgo.Record
		for i := 0; i < 10; i++ {
			rs = append(rs, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 100), Timestamp: base.Add(time.Duration(i) * time.Minute)})
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr(), name)
		lo, err := adm.ListOffsetsAfterMilli(ctx, base.Add(4*time.Minute+time.Second).UnixMilli(), topic)
		require.NoError(t, err)
		o, _ := lo.Lookup(topic, 0)
		require.NoError(t, o.Err)
		require.Equal(t, int64(5), o.Offset, name)
		require.Equal(t, base.Add(5*time.Minute).UnixMilli(), o.Timestamp, name)

		mx, err := adm.ListMaxTimestampOffsets(ctx, topic)
		require.NoError(t, err)
		o, _ = mx.Lookup(topic, 0)
		require.Equal(t, int64(9), o.Offset, name)
	}
}

func TestRestartKeepsTopicsAndRecords(t *testing.T) {
	b := testbroker.Start(t)
	cl, adm := newClient(t, b.Addr, kgo.DefaultProduceTopic("keep"))
	createTopic(t, adm, "keep", 3, map[string]*string{"retention.ms": kadm.StringPtr("86400000")})
	ctx := ctxT(t, 60*time.Second)
	for i := 0; i < 300; i++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	cl.Close()
	require.NoError(t, b.Stop())
	require.Contains(t, b.Log(), "shutting down")

	b.Restart()
	_, adm = newClient(t, b.Addr)
	td, err := adm.ListTopics(ctx, "keep")
	require.NoError(t, err)
	require.Len(t, td["keep"].Partitions, 3)
	rcs, err := adm.DescribeTopicConfigs(ctx, "keep")
	require.NoError(t, err)
	rc, _ := rcs.On("keep", nil)
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			require.Equal(t, "86400000", c.MaybeValue())
		}
	}
	require.Len(t, consumeAll(t, b.Addr, "keep", 300), 300)
}

func TestRetentionDeletesOldSegments(t *testing.T) {
	b := testbroker.Start(t, "--retention-check-interval", "50ms")
	cl, adm := newClient(t, b.Addr, kgo.DefaultProduceTopic("ret"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	createTopic(t, adm, "ret", 1, map[string]*string{
		"segment.bytes": kadm.StringPtr("4096"), "retention.bytes": kadm.StringPtr("8192"),
	})
	ctx := ctxT(t, 30*time.Second)
	val := make([]byte, 500) // ~570 bytes per batch: about 7 batches per 4 KiB segment
	for i := 0; i < 200; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr())
	}
	testbroker.WaitFor(t, 20*time.Second, "retention to move the log start", func() bool {
		so, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			return false
		}
		o, _ := so.Lookup("ret", 0)
		return o.Offset > 150
	})
	// Time-based: a tiny retention.ms removes everything but the active segment.
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("1")}}, "ret")
	require.NoError(t, err)
	require.NoError(t, alter[0].Err)
	testbroker.WaitFor(t, 20*time.Second, "time retention", func() bool {
		so, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			return false
		}
		o, _ := so.Lookup("ret", 0)
		return o.Offset > 190
	})
}
