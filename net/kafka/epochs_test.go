package kafka_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/node"
)

// OffsetForLeaderEpoch on a single node, every version: the epoch a
// consumer last saw ends at the log end (KIP-320: nothing was truncated); a
// newer one is unknown (-1/-1, no error); v2+ checks the epoch the client
// believes current; an unknown partition says so.
func TestOffsetForLeaderEpoch(t *testing.T) {
	s := startServer(t, node.Config{})
	createTopic(t, s, "e", 1) // leader epoch 0
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.DefaultProduceTopic("e"))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr())

	rc := dialRaw(t, s)
	ask := func(version int16, topic string, epoch, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = version, -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc.send(req)
		resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
		resp.Version = version
		rc.recv(resp)
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		return resp.Topics[0].Partitions[0]
	}
	for v := int16(0); v <= 4; v++ {
		p := ask(v, "e", 0, -1)
		require.Zero(t, p.ErrorCode, "v%d", v)
		require.Equal(t, int64(2), p.EndOffset, "v%d", v)
		if v >= 1 {
			require.Equal(t, int32(0), p.LeaderEpoch, "v%d", v)
		}
		p = ask(v, "e", 3, -1)
		require.Zero(t, p.ErrorCode, "v%d", v)
		require.Equal(t, int64(-1), p.EndOffset, "v%d: an epoch newer than any is unknown", v)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, ask(v, "nope", 0, -1).ErrorCode, "v%d", v)
	}
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, ask(2, "e", 0, 1).ErrorCode)
	require.Zero(t, ask(1, "e", 0, 1).ErrorCode, "v1 has no current epoch to check")
}
