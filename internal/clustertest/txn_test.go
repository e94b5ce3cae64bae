package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/cluster"
	"github.com/moonmq/moonmq/internal/testbroker"
)

// readCommitted reads topic from the start at read_committed until it
// has read everything below each partition's last stable offset, and
// returns the values by partition.
func readCommitted(t *testing.T, c *cluster.Cluster, topic string, want int) map[string]int {
	t.Helper()
	cl, _ := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := ctxT(t, 60*time.Second)
	seen := map[string]int{}
	n := 0
	for n < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
	}
	return seen
}

// TestTransactionSurvivesCoordinatorKill: a transaction over partitions
// led by every node, whose coordinator is SIGKILLed before it ends, still
// ends all-or-nothing: the producer commits it through the coordinator
// that takes over (which loads the transaction from the replicated
// __transaction_state), and a read_committed reader sees every record of
// it exactly once, next to the transaction committed before the kill.
func TestTransactionSurvivesCoordinatorKill(t *testing.T) {
	cluster.SkipUnlessSupported(t)
	c := cluster.Start(t, cluster.Options{Nodes: 3, SessionTimeout: 3 * time.Second,
		Flags: []string{"--transaction-state-partitions", "3", "--offsets-topic-partitions", "3"}})
	cl, adm := c.Client()
	const topic, partitions = "txn", 3
	createTopic(t, cl, topic, partitions, 3, nil)

	prod, _ := c.Client(kgo.TransactionalID("tx-kill"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second))
	ctx := ctxT(t, 2*time.Minute)
	produce := func(prefix string) {
		require.NoError(t, prod.BeginTransaction())
		for p := range int32(partitions) {
			for i := range 5 {
				r := &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d-%d", prefix, p, i)), Partition: p}
				require.NoError(t, prod.ProduceSync(ctx, r).FirstErr())
			}
		}
	}
	produce("first")
	require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit))
	produce("second")

	fc := adm.FindTxnCoordinators(ctx, "tx-kill")
	co, ok := fc["tx-kill"]
	require.True(t, ok)
	require.NoError(t, co.Err)
	t.Logf("coordinator of tx-kill: node %d; killing it with the second transaction open", co.NodeID)
	c.Kill(co.NodeID)
	testbroker.WaitFor(t, 60*time.Second, "another coordinator for tx-kill", func() bool {
		for _, nd := range c.Nodes {
			if nd.ID != co.NodeID && listsBroker(nd.Kafka, co.NodeID) {
				return false
			}
		}
		return true
	})
	require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit), "commit through the new coordinator")
	c.Restart(co.NodeID)

	seen := readCommitted(t, c, topic, 2*partitions*5)
	require.Len(t, seen, 2*partitions*5, "every record of both transactions: %v", seen)
	for v, n := range seen {
		require.Equal(t, 1, n, "%s read %d times", v, n)
	}
}
