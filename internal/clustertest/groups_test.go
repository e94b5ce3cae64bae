package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/history"
	"github.com/moonmq/moonmq/internal/testbroker"
)

// produceAll writes n records round-robin over partitions with an
// idempotent acks=all producer and requires every one acknowledged.
func produceAll(t *testing.T, c *cluster.Cluster, h *history.History, topic string, partitions int32, n int) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	pr := newProducer(t, c, h, "p", topic)
	for i := 0; i < n; i++ {
		pr.produce(ctx, int32(i)%partitions)
	}
	pr.wait()
	acked, _, _ := h.Counts()
	require.Equal(t, n, acked)
}

// consumeAndCommit joins group, polls until it has at least n records, and
// commits what it polled; it returns the committed offsets.
func consumeAndCommit(t *testing.T, c *cluster.Cluster, group, topic string, n int) map[int32]int64 {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Seeds()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(4<<10))
	require.NoError(t, err)
	defer cl.Close() // leaves the group
	next := map[int32]int64{}
	got := 0
	for got < n {
		fs := cl.PollRecords(ctx, n-got)
		require.NoError(t, ctx.Err(), "consumed %d of %d", got, n)
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			got++
		})
	}
	require.NoError(t, cl.CommitUncommittedOffsets(ctx))
	return next
}

// committed reads group's committed offsets of topic (through any node,
// retrying while the coordinator moves).
func committed(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	var out map[int32]int64
	testbroker.WaitFor(t, 60*time.Second, "the committed offsets of "+group, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		os, err := adm.FetchOffsets(ctx, group)
		if err != nil || os.Error() != nil {
			return false
		}
		out = map[int32]int64{}
		os.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				out[o.Partition] = o.At
			}
		})
		return true
	})
	return out
}

// TestGroupKeepsOffsetsWhenCoordinatorDies: a group commits, the node that
// coordinates it is SIGKILLed; the offsets are still there (the new leader
// of the __consumer_offsets partition loaded them) and the group resumes
// exactly after them.
func TestGroupKeepsOffsetsWhenCoordinatorDies(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	c := cluster.Start(t, cluster.Options{Nodes: 3, SessionTimeout: 3 * time.Second})
	cl, adm := c.Client()
	const topic, group, partitions, n = "work", "workers", 3, 300
	createTopic(t, cl, topic, partitions, 3, nil)
	produceAll(t, c, &history.History{}, topic, partitions, n)

	want := consumeAndCommit(t, c, group, topic, n/2)
	require.Equal(t, want, committed(t, adm, group, topic))
	fc := adm.FindGroupCoordinators(ctxT(t, 30*time.Second), group)
	co, ok := fc[group]
	require.True(t, ok)
	require.NoError(t, co.Err)
	t.Logf("coordinator of %s: node %d; killing it", group, co.NodeID)
	c.Kill(co.NodeID)
	// Once the controller fenced it, no live node lists it. A client that
	// looked the coordinator up before that keeps it cached while dialing
	// it fails (franz-go forgets a coordinator only on a coordinator error
	// from it), so the check reads through a client made after the fence,
	// as a restarted consumer would.
	testbroker.WaitFor(t, 30*time.Second, fmt.Sprintf("node %d fenced", co.NodeID), func() bool {
		for _, nd := range c.Nodes {
			if nd.ID != co.NodeID && listsBroker(nd.Kafka, co.NodeID) {
				return false
			}
		}
		return true
	})
	_, adm = c.Client()
	require.Equal(t, want, committed(t, adm, group, topic), "offsets survive the coordinator")

	// The group resumes after the committed offsets: the rest, once.
	ctx := ctxT(t, time.Minute)
	cl, _ = c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	rest, seen := 0, map[[2]int64]bool{}
	var total int64
	for _, o := range want {
		total += o
	}
	for int64(rest) < n-total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "resumed: %d of %d", rest, n-total)
		fs.EachRecord(func(r *kgo.Record) {
			require.GreaterOrEqual(t, r.Offset, want[r.Partition], "partition %d read again below its committed offset", r.Partition)
			k := [2]int64{int64(r.Partition), r.Offset}
			require.False(t, seen[k], "partition %d offset %d read twice", r.Partition, r.Offset)
			seen[k] = true
			rest++
		})
	}
	c.Restart(co.NodeID)
}

// TestFullClusterRestartKeepsEverything: every node SIGTERMed at once and
// started again keeps the topics (partitions, replicas, configs), every
// acknowledged record and the groups' offsets.
func TestFullClusterRestartKeepsEverything(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	c := cluster.Start(t, cluster.Options{Nodes: 3, SessionTimeout: 3 * time.Second})
	cl, adm := c.Client()
	const topic, group, partitions, n = "keep", "keepers", 3, 600
	createTopic(t, cl, topic, partitions, 3, map[string]*string{"retention.ms": kadm.StringPtr("86400000")})
	h := &history.History{}
	produceAll(t, c, h, topic, partitions, n)
	want := consumeAndCommit(t, c, group, topic, n/3)

	c.TermAll(30 * time.Second)
	c.LaunchAll()
	c.WaitAllReady()

	cl, adm = c.Client()
	waitHealthy(t, cl, topic, partitions, 3, 60*time.Second)
	ctx := ctxT(t, 30*time.Second)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	var retention string
	for _, cfg := range rc.Configs {
		if cfg.Key == "retention.ms" {
			retention = cfg.MaybeValue()
		}
	}
	require.Equal(t, "86400000", retention)

	res := h.Check(finalLog(t, c, topic, partitions))
	require.True(t, res.OK(), res.Error(20))
	require.Equal(t, n, res.Stored)
	require.Equal(t, want, committed(t, adm, group, topic))
}

// listsBroker reports whether the node at addr answers Metadata with broker
// id among its brokers (or cannot answer).
func listsBroker(addr string, id int32) bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return true
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return true
	}
	for _, b := range resp.Brokers {
		if b.NodeID == id {
			return true
		}
	}
	return false
}
