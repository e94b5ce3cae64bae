package bench

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/engine/txncoord"
	"github.com/moonmq/moonmq/internal/testnode"
	"github.com/moonmq/moonmq/net/client"
	"github.com/moonmq/moonmq/node"
)

// txnAddr starts an in-process MoonMQ node (transactions need a broker
// with a transaction coordinator; MOONMQ_TEST_ADDR still takes a real one).
// A few __transaction_state partitions make the first coordinator lookup
// quick.
func txnAddr(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("MOONMQ_TEST_ADDR"); addr != "" {
		return addr
	}
	return testnode.Start(t, node.Config{Txns: txncoord.Config{Partitions: 3}}).Addr().String()
}

// committedCount reads topic from the start at read_committed and returns
// how many data records it holds, after waiting (with a deadline) until no
// transaction is open on it: the last stable offset of every partition has
// caught up with its high watermark.
func committedCount(t *testing.T, addr, topic string) int64 {
	t.Helper()
	ctx := testCtx(t)
	cl, err := client.Dial(ctx, client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	var ends map[int32]int64
	require.Eventually(t, func() bool {
		hw, err := cl.EndOffsets(ctx, topic)
		require.NoError(t, err)
		lso, err := cl.StableOffsets(ctx, topic)
		require.NoError(t, err)
		ends = hw[topic]
		for p, end := range ends {
			if lso[topic][p] != end {
				return false
			}
		}
		return len(ends) > 0
	}, 20*time.Second, 10*time.Millisecond, "transactions still open on %s", topic)

	// Control records (the markers) are kept, so that every partition is
	// seen to reach its end; only data records are counted. At
	// read_committed, aborted records are never returned.
	starts := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > 0 {
			starts[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(starts) == 0 {
		return 0
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer kc.Close()
	var n int64
	next := map[int32]int64{}
	done := func() bool {
		for p := range starts {
			if next[p] < ends[p] {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := kc.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read_committed read of %s did not reach %v (at %v)", topic, ends, next)
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				n++
			}
		})
	}
	return n
}

func runTxn(t *testing.T, args ...string) (Result, string, error) {
	t.Helper()
	out, errOut, err := run(t, args...)
	require.Empty(t, errOut, "no progress line when stderr is not a terminal")
	var res Result
	if strings.HasPrefix(out, "{") { // --output json
		require.NoError(t, json.Unmarshal([]byte(out), &res), out)
		require.Equal(t, 1, strings.Count(out, "\n"), "exactly one JSON line")
	}
	return res, out, err
}

// A transactional run commits exactly what it reports: a read_committed
// count of the topic equals the records of the result, split in
// transactions of --transaction-records (the last of each producer
// shorter when they do not divide).
func TestProduceTransactional(t *testing.T) {
	addr := txnAddr(t)
	topic := topicName(t)
	res, out, err := runTxn(t, "produce", "--addr", addr, "--topic", topic, "--create", "--partitions", "3",
		"--records", "2500", "--size", "1024", "--producers", "2", "--transactional",
		"--transaction-records", "100", "--output", "json")
	require.NoError(t, err, out)
	require.Equal(t, "produce", res.Mode)
	require.Equal(t, int64(2500), res.Records)
	require.Equal(t, int64(2500*1024), res.Bytes)
	require.Zero(t, res.Failed)
	require.Empty(t, res.FirstError)
	require.NotNil(t, res.Transactions)
	// 1250 records per producer: 12 transactions of 100 and one of 50.
	require.Equal(t, Transactions{Committed: 26, Aborted: 0, Records: 100}, *res.Transactions)
	require.NotNil(t, res.Commit)
	require.Positive(t, res.Commit.Max)
	require.LessOrEqual(t, res.Commit.P50, res.Commit.P99)
	require.LessOrEqual(t, res.Commit.P99, res.Commit.Max)
	require.NotNil(t, res.Latency, "per-record acknowledgement latency as in the plain mode")
	require.Positive(t, res.RecordsPS)
	require.Positive(t, res.MBPS)
	require.Equal(t, true, res.Params["transactional"])
	require.Equal(t, float64(100), res.Params["transaction_records"])

	require.Equal(t, res.Records, committedCount(t, addr, topic))

	// Again on the same topic with the default size of transaction and
	// text output: the topic then holds both runs.
	_, out, err = runTxn(t, "produce", "--addr", addr, "--topic", topic, "--records", "1500", "--size", "100",
		"--transactional")
	require.NoError(t, err, out)
	require.Contains(t, out, "produce "+topic+"\n")
	require.Contains(t, out, "  records     1500 committed, 0 failed\n")
	require.Contains(t, out, "  txns        2 committed, 0 aborted, 1000 records each\n")
	require.Contains(t, out, "  commit      p50 ")
	require.Contains(t, out, "records/s")
	require.Contains(t, out, "MB/s")
	require.Equal(t, int64(2500+1500), committedCount(t, addr, topic))
}

// A transaction whose records fail is aborted and counted: records larger
// than the topic's max.message.bytes are refused, so every transaction
// aborts, the run fails with ErrFailed, and read_committed sees nothing.
func TestProduceTransactionalAborts(t *testing.T) {
	addr := txnAddr(t)
	topic := topicName(t)
	cl, err := client.Dial(testCtx(t), client.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.CreateTopic(testCtx(t), topic, 2, 1, map[string]string{"max.message.bytes": "2000"}))

	res, out, err := runTxn(t, "produce", "--addr", addr, "--topic", topic, "--records", "30", "--size", "4096",
		"--transactional", "--transaction-records", "10", "--output", "json")
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorContains(t, err, "3 transactions aborted")
	require.Zero(t, res.Records, out)
	require.Zero(t, res.Bytes)
	require.Equal(t, int64(30), res.Failed)
	require.Contains(t, res.FirstError, "MESSAGE_TOO_LARGE")
	require.Equal(t, Transactions{Committed: 0, Aborted: 3, Records: 10}, *res.Transactions)
	require.Zero(t, committedCount(t, addr, topic))

	// The text form says so too.
	_, out, err = runTxn(t, "produce", "--addr", addr, "--topic", topic, "--records", "5", "--size", "4096",
		"--transactional", "--transaction-records", "10")
	require.ErrorIs(t, err, ErrFailed)
	require.Contains(t, out, "  records     0 committed, 5 failed\n")
	require.Contains(t, out, "  txns        0 committed, 1 aborted, 10 records each\n")
	require.NotContains(t, out, "  commit ", "no commit latency without a commit")
	require.Contains(t, out, "  first error MESSAGE_TOO_LARGE")
}

// A run stopped by --timeout aborts the transaction it was in without
// counting its records as failed, and what it reports is what is committed.
func TestProduceTransactionalTimeout(t *testing.T) {
	addr := txnAddr(t)
	topic := topicName(t)
	res, out, err := runTxn(t, "produce", "--addr", addr, "--topic", topic, "--create", "--partitions", "2",
		"--records", "100000000", "--size", "10", "--rate", "2000", "--transactional", "--transaction-records", "500",
		"--timeout", "1500ms", "--output", "json")
	require.NoError(t, err, out)
	require.Zero(t, res.Failed)
	require.Less(t, res.Records, int64(100000000))
	require.Equal(t, res.Transactions.Committed*500, res.Records)
	require.Equal(t, res.Records, committedCount(t, addr, topic))
}

func TestProduceTransactionalFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--topic", "t", "--transaction-records", "10"}, "--transaction-records: applies only with --transactional"},
		{[]string{"produce", "--topic", "t", "--transactional", "--transaction-records", "0"}, "--transaction-records: must be at least 1"},
		{[]string{"produce", "--topic", "t", "--transactional", "--acks", "1"}, "--acks: must be all with --transactional"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			require.ErrorIs(t, err, ErrUsage)
			require.ErrorContains(t, err, tc.want)
		})
	}
	out, _, err := run(t, "produce", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "  --transactional ")
	require.Contains(t, out, "  --transaction-records N ")
	require.Contains(t, out, "(default 1000)")
	require.Contains(t, out, "(default false)")
}

// The plain mode's output has no transactional fields.
func TestProducePlainHasNoTransactions(t *testing.T) {
	res := Result{Mode: "produce", Topic: "t", Params: map[string]any{}}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.NotContains(t, string(b), "transaction")
	require.NotContains(t, string(b), "commit")
	var sb strings.Builder
	require.NoError(t, res.Print(&sb, "text"))
	require.NotContains(t, sb.String(), "txns")
	require.NotContains(t, sb.String(), "commit")
}
