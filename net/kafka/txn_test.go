package kafka_test

import (
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/internal/syncbuf"
	"github.com/moonmq/moonmq/node"
)

// Until transactions land, a transactional producer is refused with the
// code clients present as "not supported" (not an authorization failure,
// which sends users to their ACLs), and the broker logs why, once per
// connection however often the client retries.
func TestTransactionalProducerIsRefusedAsUnsupported(t *testing.T) {
	var logs syncbuf.Buffer
	s := startServer(t, node.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	createTopic(t, s, "t", 1)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.TransactionalID("tx-1"),
		kgo.DefaultProduceTopic("t"))
	require.NoError(t, err)
	defer cl.Close()
	// franz-go initializes its producer id when the transaction begins.
	require.ErrorIs(t, cl.BeginTransaction(), kerr.UnsupportedVersion)

	// A raw transactional Produce gets the code and a message saying why.
	rc := dialRaw(t, s)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 9, -1, 1000, kmsg.StringPtr("tx-2")
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0}}
	req.Topics = append(req.Topics, rt)
	rc.send(req)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	rc.recv(resp)
	p := resp.Topics[0].Partitions[0]
	require.ErrorIs(t, kerr.ErrorForCode(p.ErrorCode), kerr.UnsupportedVersion)
	require.NotNil(t, p.ErrorMessage)
	require.Contains(t, *p.ErrorMessage, "does not support transactions")

	// ApiVersions does not offer the transaction APIs, and a client that
	// sends one anyway is told the version is unsupported.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	rc.send(av)
	avr := av.ResponseKind().(*kmsg.ApiVersionsResponse)
	rc.recv(avr)
	for _, k := range avr.ApiKeys {
		require.NotContains(t, []int16{kmsg.AddPartitionsToTxn.Int16(), kmsg.EndTxn.Int16(),
			kmsg.AddOffsetsToTxn.Int16(), kmsg.ListTransactions.Int16(), kmsg.DescribeTransactions.Int16()},
			k.ApiKey, "advertised without a coordinator")
	}
	lt := kmsg.NewPtrListTransactionsRequest()
	lt.Version = 0
	rc.send(lt)
	require.Equal(t, kerr.UnsupportedVersion.Code, int16(binary.BigEndian.Uint16(rc.recvBody())))

	out := logs.String()
	require.Contains(t, out, "transactional_id=tx-1")
	require.Contains(t, out, "transactional_id=tx-2")
	require.Equal(t, 2, strings.Count(out, "refused a transactional producer"),
		"once per connection: %s", out)
}
