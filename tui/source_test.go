package tui

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/moonmq/moonmq/engine/group"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/client"
	"github.com/moonmq/moonmq/node"
)

// TestClientSourceWithKfake runs the production Source (net/client over
// franz-go) against franz-go's in-process fake Kafka, which implements
// consumer groups: the snapshot must carry topics, end offsets, groups with
// members, committed offsets and lag, and the tail must stream records.
func TestClientSourceWithKfake(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	require.NoError(t, err)
	t.Cleanup(fake.Close)
	testClientSource(t, fake.ListenAddrs()[0], nil, []int32{0}) // kfake numbers brokers from 0

	// kfake implements transactions: an open one is listed, and holds the
	// partition's last stable offset back.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := client.Options{Addr: fake.ListenAddrs()[0], ClientID: "tui-test", RequestTimeout: 10 * time.Second}
	cl, err := client.Dial(ctx, opts)
	require.NoError(t, err)
	defer cl.Close()
	tx, err := cl.BeginTransaction(ctx, "tui-txn")
	require.NoError(t, err)
	defer func() { _ = tx.Abort(ctx) }()
	_, err = tx.Produce(ctx, "orders", []client.Record{{Partition: 1, Value: []byte("in a transaction")}})
	require.NoError(t, err)
	src, err := DialClient(opts)(ctx)
	require.NoError(t, err)
	defer src.Close()
	s := fetchSnapshot(ctx, src, time.Now)
	require.NoError(t, s.err)
	n, ok := s.openTxns()
	require.True(t, ok, "%v", s.txnsErr)
	require.Equal(t, 1, n, "%v", s.txns)
	td, err := fetchTopicDetail(ctx, src, "orders")
	require.NoError(t, err)
	require.Less(t, td.stable[1], s.ends["orders"][1])
}

// TestClientSourceWithMoonMQ is the same against MoonMQ (a node run
// in-process), what `moonmq top` is mostly pointed at.
func TestClientSourceWithMoonMQ(t *testing.T) {
	// No initial rebalance delay: the group has one member, and waiting
	// for others is not what is tested.
	n := testnode.Start(t, node.Config{Groups: group.Config{InitialRebalanceDelay: time.Nanosecond}})
	create := func(ctx context.Context, cl *client.Client) error { return cl.CreateTopic(ctx, "orders", 2, 1, nil) }
	testClientSource(t, n.Addr().String(), create, []int32{1})
}

// testClientSource checks the Source against the broker at addr, where
// create (if not nil) makes topic "orders" with two partitions, and whose
// broker ids are brokers.
func testClientSource(t *testing.T, addr string, create func(context.Context, *client.Client) error, brokers []int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	opts := client.Options{Addr: addr, ClientID: "tui-test", RequestTimeout: 10 * time.Second}
	src, err := DialClient(opts)(ctx)
	require.NoError(t, err)
	t.Cleanup(src.Close)
	cl, err := client.Dial(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	if create != nil {
		require.NoError(t, create(ctx, cl))
	}

	const n = 20
	recs := make([]client.Record, n)
	for i := range recs {
		recs[i] = client.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"n":%d}`, i)}
	}
	_, err = cl.Produce(ctx, "orders", recs[:n/2])
	require.NoError(t, err)

	// A group consumes and commits the first half; the second half is
	// its lag.
	gctx, gcancel := context.WithCancel(ctx)
	seen := 0
	require.NoError(t, cl.Consume(gctx, "orders", "billing", client.Earliest(), func(client.Record) error {
		seen++
		if seen == n/2 {
			gcancel()
		}
		return nil
	}))
	gcancel()
	_, err = cl.Produce(ctx, "orders", recs[n/2:])
	require.NoError(t, err)

	var s *snapshot
	require.Eventually(t, func() bool {
		s = fetchSnapshot(ctx, src, time.Now)
		if s.err != nil || s.groupsErr != nil {
			return false
		}
		g, ok := s.group("billing")
		return ok && g.desc != nil && g.desc.TotalLag == n/2
	}, 30*time.Second, 50*time.Millisecond, "group billing with lag %d", n/2)
	require.Equal(t, brokers, brokerIDs(s.cluster.ClusterInfo))
	ti, ok := s.topic("orders")
	require.True(t, ok)
	require.Equal(t, 2, ti.Partitions)
	require.Equal(t, "delete", ti.CleanupPolicy, "the topics view shows which topics are compacted")
	require.Equal(t, "", fmtCompact(ti))
	require.Equal(t, map[int32]int64{0: n / 2, 1: n / 2}, s.ends["orders"])
	g, _ := s.group("billing")
	require.Equal(t, "consumer", g.summary.ProtocolType)
	require.Len(t, g.desc.Offsets, 2)

	st, err := src.StableOffsets(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, map[int32]int64{0: n / 2, 1: n / 2}, st)
	td, err := fetchTopicDetail(ctx, src, "orders")
	require.NoError(t, err)
	require.Len(t, td.desc.Partitions, 2)
	_, err = fetchTopicDetail(ctx, src, "missing")
	require.ErrorIs(t, err, client.ErrNotFound)

	// The tail streams the newest records per partition, then new ones.
	var mu sync.Mutex
	var got []client.Record
	tctx, tcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- src.Consume(tctx, "orders", client.FromEnd(3), func(r client.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, r)
			return nil
		})
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	require.Eventually(t, func() bool { return count() == 6 }, 30*time.Second, 10*time.Millisecond)
	_, err = cl.Produce(ctx, "orders", []client.Record{{Partition: 0, Value: []byte("live")}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return count() == 7 }, 30*time.Second, 10*time.Millisecond)
	tcancel()
	require.NoError(t, <-done)
}

func brokerIDs(ci client.ClusterInfo) []int32 {
	out := make([]int32, len(ci.Brokers))
	for i, b := range ci.Brokers {
		out[i] = b.ID
	}
	return out
}

func TestDialClientUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A port nothing listens on: the listener is closed right away.
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	addr := fake.ListenAddrs()[0]
	fake.Close()
	_, err = DialClient(client.Options{Addr: addr, DialTimeout: time.Second, RequestTimeout: time.Second})(ctx)
	require.ErrorIs(t, err, client.ErrUnreachable)
	require.Contains(t, explain(err), "connection refused")
}
