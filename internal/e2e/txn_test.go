package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/internal/testbroker"
)

// TestTransactionsKcatReadCommitted: librdkafka reading at read_committed
// (kcat -X isolation.level=read_committed) sees a committed transaction
// and never an aborted one, which read_uncommitted shows; both skip the
// markers.
func TestTransactionsKcatReadCommitted(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, "--auto-create-topics", "--default-partitions", "2", "--transaction-state-partitions", "2")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("kcat-tx"), kgo.DefaultProduceTopic("kt"),
		kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tx := range []struct {
		values []string
		end    kgo.TransactionEndTry
	}{{[]string{"c1", "c2"}, kgo.TryCommit}, {[]string{"a1", "a2"}, kgo.TryAbort}, {[]string{"c3"}, kgo.TryCommit}} {
		require.NoError(t, cl.BeginTransaction())
		for _, v := range tx.values {
			require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr())
		}
		require.NoError(t, cl.EndTransaction(ctx, tx.end))
	}
	read := func(isolation string) []string {
		out := testbroker.Kcat(t, "", "-b", b.Addr, "-C", "-t", "kt", "-o", "beginning", "-e",
			"-X", "isolation.level="+isolation, "-f", "%s\n")
		fields := strings.Fields(out)
		sort.Strings(fields)
		return fields
	}
	require.Equal(t, []string{"c1", "c2", "c3"}, read("read_committed"))
	require.Equal(t, []string{"a1", "a2", "c1", "c2", "c3"}, read("read_uncommitted"))
}

// TestTransactionsSurviveKill9: SIGKILL of a single node right after a
// commit was acknowledged, and with another transaction open. After the
// restart the coordinator finishes the commit (its markers are written
// even if the crash came first) and aborts the open transaction at its
// timeout, so a read_committed reader sees exactly the committed records
// and is not held back.
func TestTransactionsSurviveKill9(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, "--auto-create-topics", "--default-partitions", "2", "--transaction-state-partitions", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(id string, values ...string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic("kill"),
			kgo.AllowAutoTopicCreation(), kgo.TransactionTimeout(3*time.Second))
		require.NoError(t, err)
		require.NoError(t, cl.BeginTransaction())
		for _, v := range values {
			require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr())
		}
		return cl
	}
	committed := produce("tx-committed", "c1", "c2", "c3", "c4")
	require.NoError(t, committed.EndTransaction(ctx, kgo.TryCommit))
	open := produce("tx-open", "o1", "o2")
	b.Kill()
	committed.Close()
	open.Close()
	b.Restart()

	_, adm := newClient(t, b.Addr)
	testbroker.WaitFor(t, 60*time.Second, "both transactions completed after the restart", func() bool {
		d, err := adm.DescribeTransactions(ctx, "tx-committed", "tx-open")
		if err != nil {
			return false
		}
		return d["tx-committed"].State == "CompleteCommit" && d["tx-open"].State == "CompleteAbort"
	})
	cl, _ := newClient(t, b.Addr, kgo.ConsumeTopics("kill"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for len(got) < 4 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	sort.Strings(got)
	require.Equal(t, []string{"c1", "c2", "c3", "c4"}, got)
	// Nothing of the aborted transaction follows.
	stable, err := adm.ListCommittedOffsets(ctx, "kill")
	require.NoError(t, err)
	end, err := adm.ListEndOffsets(ctx, "kill")
	require.NoError(t, err)
	stable.Each(func(o kadm.ListedOffset) {
		e, _ := end.Lookup(o.Topic, o.Partition)
		require.Equal(t, e.Offset, o.Offset, "partition %d: the LSO reached the high watermark", o.Partition)
	})
}
