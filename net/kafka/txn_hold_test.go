package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/node"
)

// concurrentLogger counts franz-go's log lines about a
// CONCURRENT_TRANSACTIONS answer (it logs each retry of AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn it makes for one, at debug).
type concurrentLogger struct{ n atomic.Int64 }

func (l *concurrentLogger) Level() kgo.LogLevel { return kgo.LogLevelDebug }

func (l *concurrentLogger) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	if strings.Contains(msg, "CONCURRENT_TRANSACTIONS") || strings.Contains(fmt.Sprint(keyvals...), "CONCURRENT_TRANSACTIONS") {
		l.n.Add(1)
	}
}

// A producer's next transaction begins right after EndTxn answers, while
// the coordinator is still writing the previous one's markers: its
// AddPartitionsToTxn and AddOffsetsToTxn (a client of transaction version
// 0 or 1 sends them itself, a consume-transform-produce loop the latter
// under any version) are held until those are written, never answered
// CONCURRENT_TRANSACTIONS, which a client retries only after a backoff
// (franz-go 20 ms, Java 20-100 ms). Every transaction commits whole.
func TestBackToBackTransactionsNotRefused(t *testing.T) {
	s := startServer(t, node.Config{Txns: txncoord.Config{TransactionVersion: 0}})
	createTopic(t, s, "bb", 4)
	addr := s.Addr().String()

	logger := &concurrentLogger{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("bb-1"),
		kgo.DefaultProduceTopic("bb"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30*time.Second), kgo.WithLogger(logger))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const group = "bb-group"
	const txns = 30
	// A client finds the group's coordinator before it adds offsets (which
	// creates __consumer_offsets).
	for {
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey, find.CoordinatorKeys = group, []string{group}
		resp, err := find.RequestWith(ctx, cl)
		require.NoError(t, err)
		if len(resp.Coordinators) > 0 && resp.Coordinators[0].ErrorCode == 0 || resp.ErrorCode == 0 && len(resp.Coordinators) == 0 {
			break
		}
		require.NoError(t, ctx.Err(), "finding the group's coordinator")
	}
	var want []string
	for i := range txns {
		require.NoError(t, cl.BeginTransaction())
		if i%2 == 1 {
			// Every other transaction begins with AddOffsetsToTxn, as a
			// consume-transform-produce loop's may.
			id, epoch, err := cl.ProducerID(ctx)
			require.NoError(t, err)
			add := kmsg.NewPtrAddOffsetsToTxnRequest()
			add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "bb-1", id, epoch, group
			for {
				resp, err := add.RequestWith(ctx, cl)
				require.NoError(t, err)
				code := resp.ErrorCode
				require.NotEqual(t, kerr.ConcurrentTransactions.Code, code, "AddOffsetsToTxn of transaction %d", i)
				if code == 0 {
					break
				}
				// The group's coordinator may still be loading.
				require.True(t, kerr.IsRetriable(kerr.ErrorForCode(code)), "AddOffsetsToTxn of transaction %d: %v", i,
					kerr.ErrorForCode(code))
				require.NoError(t, ctx.Err())
			}
		}
		for p := range int32(4) {
			v := fmt.Sprintf("t%02d-p%d", i, p)
			want = append(want, v)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v), Partition: p}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
				}
			})
		}
		require.NoError(t, cl.Flush(ctx))
		require.NoError(t, cl.EndTransaction(ctx, kgo.TryCommit), "transaction %d", i)
	}
	require.Zero(t, logger.n.Load(), "the client was answered CONCURRENT_TRANSACTIONS")
	requireValues(t, addr, "bb", kgo.ReadCommitted(), slices.Sorted(slices.Values(want)))
}
