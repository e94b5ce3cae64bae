package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/engine/txncoord"
)

// --offsets-topic-segment-bytes and --transaction-state-segment-bytes set
// the segment.bytes of the internal topics when they are created, as
// Kafka's offsets.topic.segment.bytes and
// transaction.state.log.segment.bytes do; __consumer_offsets also gets the
// node's value back at every start (the start-up repair), and a value the
// topic would refuse is refused before anything opens.
func TestInternalTopicsSegmentBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Groups.OffsetsTopicSegmentBytes = 100
	require.ErrorContains(t, cfg.Validate(), `offsets topic segment bytes: invalid topic config: segment.bytes="100"`)
	cfg.Groups.OffsetsTopicSegmentBytes = 0
	cfg.Txns.SegmentBytes = 1000
	require.ErrorContains(t, cfg.Validate(), `transaction state segment bytes: invalid topic config: segment.bytes="1000"`)

	open := func(offsetsSegment, txnSegment int) *Node {
		t.Helper()
		cfg := testConfig(t, dir)
		cfg.Groups.OffsetsTopicSegmentBytes, cfg.Txns.SegmentBytes = offsetsSegment, txnSegment
		require.NoError(t, cfg.Validate())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return openReady(ctx, t, cfg)
	}
	segmentBytes := func(n *Node, topic string) string {
		t.Helper()
		top, ok := n.ctrl.Topic(topic)
		require.True(t, ok, "%s exists", topic)
		return top.Configs["segment.bytes"]
	}

	n := open(65536, 32768)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A commit creates __consumer_offsets, a transactional producer's
	// InitProducerID __transaction_state.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.TransactionalID("tx"))
	require.NoError(t, err)
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "t")
	require.NoError(t, err)
	var offs kadm.Offsets
	offs.AddOffset("t", 0, 7, -1)
	_, err = adm.CommitOffsets(ctx, "g", offs)
	require.NoError(t, err)
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.EndTransaction(ctx, kgo.TryAbort))
	cl.Close()
	require.Equal(t, "65536", segmentBytes(n, group.OffsetsTopic))
	require.Equal(t, "32768", segmentBytes(n, txncoord.Topic))
	require.NoError(t, n.Close())

	// Started with other values: the offsets topic takes the node's (the
	// repair at start), the transaction state topic keeps what it was
	// created with, as in Kafka.
	n = open(131072, 0)
	defer n.Close()
	require.Equal(t, "131072", segmentBytes(n, group.OffsetsTopic))
	require.Equal(t, "32768", segmentBytes(n, txncoord.Topic))
	cl, err = kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	require.NoError(t, err)
	o, ok := fetched.Lookup("t", 0)
	require.True(t, ok)
	require.EqualValues(t, 7, o.At, "the commit survived the repair")
}
