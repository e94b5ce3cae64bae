package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/client"
)

func TestKeyFormat(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		i    int64
		want string
	}{
		{1, 0, "0"},
		{10, 9, "9"},
		{11, 10, "10"},
		{11, 3, "03"},
		{100_000, 42, "00042"},
		{100_001, 100_000, "100000"},
	} {
		require.Equal(t, tc.want, string(newKeySpace(tc.n, keyOrderRandom).format(tc.i)), "key %d of %d", tc.i, tc.n)
	}
	require.Nil(t, newKeySpace(0, keyOrderRandom), "no --keys: keyless")
}

// TestRecordGen: sequential keys go round-robin over the producers of a
// run, random ones stay in the space and cover it, and --tombstones sends
// that share of null values (nil, not empty) and only with keys.
func TestRecordGen(t *testing.T) {
	cfg := DefaultProduceConfig()
	cfg.Size = 16
	payload := make([]byte, cfg.Size+payloadSpread)
	for i := range payload {
		payload[i] = byte(i) | 1
	}

	keys := newKeySpace(7, keyOrderSequential)
	a, b := newRecordGen(&cfg, payload, keys, 0), newRecordGen(&cfg, payload, keys, 1)
	var got []string
	for i := range 16 {
		g := a
		if i%3 == 0 {
			g = b
		}
		r := g.next()
		require.Len(t, r.Value, cfg.Size)
		got = append(got, string(r.Key))
	}
	require.Equal(t, strings.Fields("0 1 2 3 4 5 6 0 1 2 3 4 5 6 0 1"), got, "one counter for the run's producers")

	g := newRecordGen(&cfg, payload, newKeySpace(1000, keyOrderRandom), 3)
	seen := map[string]int{}
	for range 20_000 {
		r := g.next()
		require.Len(t, r.Key, 3)
		require.NotNil(t, r.Value)
		seen[string(r.Key)]++
	}
	require.Len(t, seen, 1000, "20 draws a key on average: every key comes up")

	cfg.Tombstones = 0.25
	g = newRecordGen(&cfg, payload, newKeySpace(1000, keyOrderRandom), 0)
	tomb := 0
	for range 20_000 {
		r := g.next()
		require.NotNil(t, r.Key)
		if r.Value == nil {
			tomb++
		}
	}
	require.InDelta(t, 0.25, float64(tomb)/20_000, 0.02)

	cfg.Tombstones = 1
	g = newRecordGen(&cfg, payload, newKeySpace(5, keyOrderRandom), 0)
	for range 100 {
		require.Nil(t, g.next().Value)
	}

	g = newRecordGen(&cfg, payload, nil, 0) // keyless: --tombstones does not apply
	r := g.next()
	require.Nil(t, r.Key)
	require.Len(t, r.Value, cfg.Size)
}

func TestTopicConfigsFlag(t *testing.T) {
	var c topicConfigs
	require.NoError(t, c.Set("cleanup.policy=compact,delete,segment.bytes=1048576"))
	require.NoError(t, c.Set("min.cleanable.dirty.ratio=0.1"))
	require.NoError(t, c.Set("message.timestamp.type=LogAppendTime,x=a=b"))
	require.Equal(t, topicConfigs{
		"cleanup.policy": "compact,delete", "segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "0.1", "message.timestamp.type": "LogAppendTime", "x": "a=b",
	}, c)
	require.Equal(t, "cleanup.policy=compact,delete,message.timestamp.type=LogAppendTime,min.cleanable.dirty.ratio=0.1,segment.bytes=1048576,x=a=b", c.String())
	require.ErrorContains(t, c.Set("segment.bytes=1"), "segment.bytes is given twice")
}

// TestProduceKeyedToCompactedTopic runs the bench against a MoonMQ node:
// --topic-config makes the topic compacted, --keys with --key-order
// sequential writes every key the same number of times, the topic holds
// exactly those keys, and a keyless run is refused (INVALID_RECORD, as
// Kafka refuses keyless records on compacted topics).
func TestProduceKeyedToCompactedTopic(t *testing.T) {
	addr := txnAddr(t) // a MoonMQ node (kfake does not refuse keyless records)
	topic := topicName(t)
	out, errOut, err := run(t, "produce", "--addr", addr, "--topic", topic, "--create", "--partitions", "2",
		"--records", "200", "--size", "32", "--keys", "50", "--key-order", "sequential",
		"--topic-config", "cleanup.policy=compact,delete", "--topic-config", "segment.bytes=1048576,min.compaction.lag.ms=60000",
		"--output", "json")
	require.NoError(t, err, errOut)
	var res Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.EqualValues(t, 200, res.Records)
	require.EqualValues(t, 200*(2+32), res.Bytes, "payload bytes count the keys")
	require.EqualValues(t, 50, res.Params["keys"])
	require.Equal(t, "sequential", res.Params["key_order"])

	cl, err := client.Dial(testCtx(t), client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	desc, err := cl.DescribeTopic(testCtx(t), topic)
	require.NoError(t, err)
	for name, want := range map[string]string{"cleanup.policy": "compact,delete", "segment.bytes": "1048576",
		"min.compaction.lag.ms": "60000"} {
		c, ok := desc.Config(name)
		require.True(t, ok, name)
		require.Equal(t, want, c.Value, name)
	}
	recs, err := cl.Read(testCtx(t), client.ReadRequest{Topic: topic, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, recs, 200)
	perKey := map[string]int{}
	partOf := map[string]int32{}
	for _, r := range recs {
		perKey[string(r.Key)]++
		if p, ok := partOf[string(r.Key)]; ok {
			require.Equal(t, p, r.Partition, "a key's records stay in one partition")
		}
		partOf[string(r.Key)] = r.Partition
		require.Len(t, r.Value, 32)
	}
	want := map[string]int{}
	for i := range 50 {
		want[fmt.Sprintf("%02d", i)] = 4
	}
	require.Equal(t, want, perKey)

	// Tombstones: null values for keys of the space.
	out, errOut, err = run(t, "produce", "--addr", addr, "--topic", topic, "--records", "20", "--keys", "50",
		"--tombstones", "1", "--output", "json")
	require.NoError(t, err, errOut)
	recs, err = cl.Read(testCtx(t), client.ReadRequest{Topic: topic, Limit: 1000})
	require.NoError(t, err)
	require.Len(t, recs, 220)
	nulls := 0
	for _, r := range recs {
		if r.Value == nil {
			nulls++
			require.Contains(t, want, string(r.Key))
		}
	}
	require.Equal(t, 20, nulls)

	// Without --keys, a compacted topic refuses every record.
	out, _, err = run(t, "produce", "--addr", addr, "--topic", topic, "--records", "5", "--output", "json")
	require.ErrorIs(t, err, ErrFailed)
	res = Result{}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.EqualValues(t, 5, res.Failed)
	require.Contains(t, res.FirstError, "INVALID_RECORD")
}
