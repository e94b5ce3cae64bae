package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	_, adm := c.Client()
	ctx := ctxT(t, 3*time.Minute)
	const topic, partitions = "orders", 3
	parts := createTopic(t, adm, topic, partitions, 3, nil)

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
	leader, _ := leaderOf(t, adm, topic, 0, -1, 30*time.Second)
	follower := c.Node(others(c, leader)[0])
	out := testbroker.Kcat(t, "", "-b", follower.Kafka, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, n/partitions, "kcat read all of partition 0 through a follower")
	require.True(t, strings.HasPrefix(lines[0], "0 "), lines[0])
	testbroker.Kcat(t, "from-kcat\n", "-b", follower.Kafka, "-P", "-t", topic, "-p", "0",
		"-X", "enable.idempotence=true", "-X", "acks=all")
	out = testbroker.Kcat(t, "", "-b", follower.Kafka, "-C", "-t", topic, "-p", "0", "-o", "-1", "-e", "-f", "%o %s\n")
	require.Equal(t, fmt.Sprintf("%d from-kcat\n", n/partitions), out)
}
