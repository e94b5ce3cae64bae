package node

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/net/kafka"
)

type throttles struct{ n atomic.Int64 }

func (h *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// The Kafka listener enforces the quotas the controller stores (a node
// with no quota source of its own takes the controller's): a quota set
// through the metadata throttles the next request over it, and once
// removed throttles no more.
func TestClientQuotasFromTheController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConfig(t, t.TempDir())
	cfg.Quotas = kafka.QuotaOptions{Window: 100 * time.Millisecond} // rates over about a second
	n, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer n.Close()
	select {
	case <-n.Ready():
	case <-ctx.Done():
		t.Fatal("the node never became ready")
	}
	var hook throttles
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()), kgo.ClientID("ctl"), kgo.DefaultProduceTopic("t"),
		kgo.WithHooks(&hook), kgo.ProducerBatchCompression(kgo.NoCompression()))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t")
	require.NoError(t, err)
	value := make([]byte, 8<<10)
	_, _ = rand.Read(value)
	produce := func() {
		t.Helper()
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr())
	}
	produce()
	require.Zero(t, hook.n.Load(), "no quota yet")

	name := "ctl"
	entity := []metadata.QuotaEntityPart{{Type: metadata.QuotaEntityClientID, Name: &name}}
	for _, err := range n.ctrl.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{{Entity: entity,
		Ops: []metadata.ClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}}}, false) {
		require.NoError(t, err)
	}
	// 8 KiB more against 4 KiB/s measured over a second: throttled.
	produce()
	require.Equal(t, int64(1), hook.n.Load(), "the controller's quota was not enforced")

	for _, err := range n.ctrl.AlterClientQuotas(ctx, []metadata.ClientQuotaAlteration{{Entity: entity,
		Ops: []metadata.ClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}}, false) {
		require.NoError(t, err)
	}
	produce()
	require.Equal(t, int64(1), hook.n.Load(), "a removed quota still throttles")
}
