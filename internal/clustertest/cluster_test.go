package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/history"
	"github.com/moonmq/moonmq/internal/testbroker"
)

// TestThreeNodeCluster: a topic with replication factor 3 on three real
// nodes; franz-go's idempotent acks=all producer and a consumer see every
// record once, in order; every node describes the same cluster; and kcat
// pointed at a follower follows the leader, for reading and writing.
func TestThreeNodeCluster(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	c := cluster.Start(t, cluster.Options{Nodes: 3})
	cl, adm := c.Client()
	ctx := ctxT(t, 3*time.Minute)
	const topic, partitions = "orders", 3
	parts := createTopic(t, cl, topic, partitions, 3, nil)

	// Placement spreads the leaders: three partitions, one per broker.
	leaders := map[int32]int{}
	for _, p := range parts {
		leaders[p.Leader]++
	}
	require.Len(t, leaders, 3, "leaders spread over the brokers: %v", parts)

	// Every node itself describes the same three brokers and controller.
	nc := newNodeClients(t, c)
	var controller int32 = -1
	for _, nd := range c.Nodes {
		resp, err := nc.metadata(ctx, nd.ID)
		require.NoError(t, err, "metadata from node %d", nd.ID)
		require.Len(t, resp.Brokers, 3, "node %d lists every broker", nd.ID)
		for _, b := range resp.Brokers {
			require.Equal(t, c.Node(b.NodeID).Kafka, fmt.Sprintf("%s:%d", b.Host, b.Port))
		}
		if controller < 0 {
			controller = resp.ControllerID
		}
		require.Equal(t, controller, resp.ControllerID, "node %d names the same controller", nd.ID)
	}

	// franz-go: idempotent acks=all, then a consumer from the start.
	h := &history.History{}
	pr := newProducer(t, c, h, "p", topic)
	const n = 3000
	for i := 0; i < n; i++ {
		pr.produce(ctx, int32(i%partitions))
	}
	pr.wait()
	acked, unknown, _ := h.Counts()
	require.Equal(t, n, acked, "every record acknowledged (%d unknown)", unknown)
	rctx, stopReader := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); reader(rctx, c, h, "c", topic, partitions) }()
	testbroker.WaitFor(t, time.Minute, "the consumer to read every record", func() bool {
		_, _, reads := h.Counts()
		return reads >= n
	})
	stopReader()
	<-done
	res := h.Check(finalLog(t, c, topic, partitions))
	require.True(t, res.OK(), res.Error(20))
	require.Equal(t, n, res.Stored)

	// kcat at a follower of partition 0: librdkafka reads the metadata
	// and goes to the leader.
	leader, _ := leaderOf(t, cl, topic, 0, -1, 30*time.Second)
	follower := c.Node(others(c, leader)[0])
	out := testbroker.Kcat(t, "", "-b", follower.Kafka, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, n/partitions, "kcat read all of partition 0 through a follower")
	require.True(t, strings.HasPrefix(lines[0], "0 "), lines[0])
	testbroker.Kcat(t, "from-kcat\n", "-b", follower.Kafka, "-P", "-t", topic, "-p", "0",
		"-X", "enable.idempotence=true", "-X", "acks=all")
	out = testbroker.Kcat(t, "", "-b", follower.Kafka, "-C", "-t", topic, "-p", "0", "-o", "-1", "-e", "-f", "%o %s\n")
	require.Equal(t, fmt.Sprintf("%d from-kcat\n", n/partitions), out)

	// min.insync.replicas defaults to a majority of the replication
	// factor, as DescribeConfigs says.
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	mir, err := cfgs.On(topic, nil)
	require.NoError(t, err)
	var minISR string
	for _, c := range mir.Configs {
		if c.Key == "min.insync.replicas" {
			minISR = c.MaybeValue()
		}
	}
	require.Equal(t, "2", minISR, "a majority of 3 replicas")

	// A replica assignment chosen by the client is kept: the first
	// replica of each partition leads, every replica is in sync.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "assigned", -1, -1
	for i, replicas := range [][]int32{{3, 1}, {2, 3}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	cresp, err := req.RequestWith(ctx, nc[follower.ID])
	require.NoError(t, err)
	require.Zero(t, cresp.Topics[0].ErrorCode, "%v", cresp.Topics[0].ErrorMessage)
	got := waitHealthy(t, cl, "assigned", 2, 2, time.Minute)
	require.Equal(t, []int32{3, 1}, got[0].Replicas)
	require.Equal(t, []int32{2, 3}, got[1].Replicas)
	require.Equal(t, int32(3), got[0].Leader)
	require.Equal(t, int32(2), got[1].Leader)
}
