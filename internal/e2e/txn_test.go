package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
