package node

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/cluster/replication"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/net/httpapi"
	"github.com/moonmq/moonmq/net/peer"
)

// The partition counts follow Kafka's per-broker semantics: assigned and
// led over this broker's partitions, under-replicated and under
// min.insync.replicas over the ones it leads; offline over the cluster.
func TestCountReplication(t *testing.T) {
	part := func(id, leader int32, replicas, isr []int32) metadata.Partition {
		return metadata.Partition{ID: id, Leader: leader, Replicas: replicas, ISR: isr}
	}
	topics := map[string]metadata.Topic{
		"a": {Name: "a", Partitions: []metadata.Partition{
			part(0, 1, []int32{1, 2, 3}, []int32{1, 2, 3}), // led, healthy
			part(1, 1, []int32{1, 2, 3}, []int32{1, 3}),    // led, under-replicated, at min ISR (2 of 3)
			part(2, 1, []int32{1, 2, 3}, []int32{1}),       // led, under-replicated and under min ISR
			part(3, 2, []int32{2, 1, 3}, []int32{2}),       // followed: another leader counts it
			part(4, 3, []int32{3, 2}, []int32{3}),          // not here
		}},
		"b": {Name: "b", Configs: map[string]string{topicconfig.MinInsyncReplicas: "3"}, Partitions: []metadata.Partition{
			part(0, 1, []int32{1, 2, 3}, []int32{1, 2}),           // led, under min ISR by its override
			part(1, metadata.NoLeader, []int32{1, 2}, []int32{2}), // offline, assigned here
			part(2, metadata.NoLeader, []int32{3}, []int32{3}),    // offline elsewhere
			part(3, 1, []int32{1}, []int32{1}),                    // led alone, RF 1
		}},
	}
	require.Equal(t, replicationCounts{assigned: 7, led: 5, underReplicated: 3, underMinISR: 3, clusterOffline: 2},
		countReplication(1, topics, true))
	require.Equal(t, replicationCounts{assigned: 7, led: 5, underReplicated: 3, underMinISR: 0, clusterOffline: 2},
		countReplication(1, topics, false), "a node without --peers refuses no acks=all for min.insync.replicas")
	require.Equal(t, replicationCounts{assigned: 7, led: 1, underReplicated: 1, underMinISR: 1, clusterOffline: 2},
		countReplication(2, topics, true), "broker 2 leads a-3 alone of three")
	require.Equal(t, replicationCounts{}, countReplication(1, nil, true))
}

// fakeAlterer answers AlterPartition as the test says.
type fakeAlterer struct {
	p   metadata.Partition
	err error
}

func (f *fakeAlterer) AlterPartition(context.Context, metadata.AlterPartitionRequest) (metadata.Partition, error) {
	return f.p, f.err
}

func (f *fakeAlterer) ReportReplicaStorage(context.Context, int32, string, [16]byte, int32, bool) (metadata.Partition, error) {
	return f.p, f.err
}

// The ISR shrink and expansion counters count the changes the controller
// committed for this node's leaders: not a refused one, not one without
// an answer, not one the controller already had.
func TestReplicatorCountsCommittedISRChanges(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	b, err := replica.Open(replica.Options{DataDir: t.TempDir(), Logger: logger, Replicated: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	tp := replica.TopicPartition{Topic: "t", Partition: 0}
	p, err := b.EnsureLeader(tp, replica.TopicID{}, nil, 1)
	require.NoError(t, err)
	fetcher, err := peer.NewFetcher(peer.FetcherOptions{NodeID: 1, Logger: logger})
	require.NoError(t, err)
	alt := &fakeAlterer{}
	r := newReplicator(1, alt, b, fetcher, nil, logger)
	t.Cleanup(r.close)
	require.NoError(t, r.setRole(tp, [16]byte{}, nil,
		metadata.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, p))
	lp := r.led[tp]
	require.NotNil(t, lp)

	send := func(c replication.Change, answer metadata.Partition, err error) {
		t.Helper()
		alt.p, alt.err = answer, err
		r.wg.Add(1)
		r.alter(lp, c)
	}
	shrink := replication.Change{LeaderEpoch: 1, PartitionEpoch: 0, ISR: []int32{1, 2}, Shrink: true}
	send(shrink, metadata.Partition{}, context.DeadlineExceeded)
	send(shrink, metadata.Partition{}, metadata.ErrInvalidUpdateVersion)
	send(shrink, metadata.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 0, ISR: []int32{1, 2}}, nil)
	shrinks, expands := r.isrChanges()
	require.Zero(t, shrinks+expands, "no answer, a refusal and an ISR the controller had are not counted")

	send(shrink, metadata.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2}}, nil)
	expand := replication.Change{LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{1, 2, 3}}
	send(expand, metadata.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2, ISR: []int32{1, 2, 3}}, nil)
	send(expand, metadata.Partition{Leader: 2, LeaderEpoch: 2, PartitionEpoch: 3, ISR: []int32{2, 3}}, nil)
	shrinks, expands = r.isrChanges()
	require.Equal(t, uint64(1), shrinks)
	require.Equal(t, uint64(1), expands, "an answer from another leadership is not this change committed")
}

// A node without --peers is a one-voter cluster: it reports itself as the
// active controller, Raft leader and only broker, leads every partition,
// and none is under-replicated.
func TestSingleNodeClusterStats(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HTTP = "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := openReady(ctx, t, cfg)
	defer n.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr().String()))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "t")
	require.NoError(t, err)

	var st httpapi.Stats
	require.NoError(t, json.Unmarshal([]byte(httpGet(t, "http://"+n.HTTPAddr().String()+"/stats")), &st))
	c := st.Cluster
	require.NotNil(t, c)
	require.Equal(t, int32(1), c.NodeID)
	require.Equal(t, int32(1), c.ControllerID)
	require.True(t, c.ActiveController)
	require.Equal(t, "leader", c.Raft.State)
	require.Positive(t, c.Raft.CommitIndex)
	require.Equal(t, []httpapi.BrokerStats{{ID: 1, Address: n.Addr().String(), Alive: true}}, c.Brokers)
	partitions := 0
	for _, tp := range st.Topics {
		for _, p := range tp.Partitions {
			partitions++
			require.Equal(t, "leader", p.Role, "%s-%d", tp.Name, p.Partition)
			require.Equal(t, int32(1), p.Leader)
			require.Equal(t, []int32{1}, p.Replicas)
			require.Equal(t, []int32{1}, p.ISR)
			require.Nil(t, p.FollowerLag)
		}
	}
	require.GreaterOrEqual(t, partitions, 2)
	require.Equal(t, partitions, c.PartitionsLed)
	require.Equal(t, partitions, c.PartitionsAssigned)
	require.Zero(t, c.PartitionsUnderReplicated+c.PartitionsUnderMinISR+c.ClusterPartitionsOffline)

	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(httpGet(t, "http://"+n.HTTPAddr().String()+"/metrics")))
	require.NoError(t, err)
	gauge := func(name string) float64 {
		f, ok := fams[name]
		require.True(t, ok, "%s exported", name)
		return f.Metric[0].GetGauge().GetValue()
	}
	require.Equal(t, float64(1), gauge("moonmq_controller_active"))
	require.Equal(t, float64(1), gauge("moonmq_controller_id"))
	require.Equal(t, float64(partitions), gauge("moonmq_partitions_led"))
	require.Equal(t, float64(partitions), gauge("moonmq_partitions_assigned"))
	require.Zero(t, gauge("moonmq_partitions_under_replicated"))
	require.Zero(t, gauge("moonmq_cluster_partitions_offline"))
	require.Zero(t, gauge("moonmq_follower_max_lag"))
	require.Equal(t, float64(1), gauge("moonmq_cluster_brokers"))
	for _, m := range fams["moonmq_raft_state"].Metric {
		want := 0.0
		if m.Label[0].GetValue() == "leader" {
			want = 1
		}
		require.Equal(t, want, m.GetGauge().GetValue(), "raft state %s", m.Label[0].GetValue())
	}
	require.Zero(t, fams["moonmq_isr_shrinks_total"].Metric[0].GetCounter().GetValue())
	require.NotContains(t, fams, "moonmq_partition_follower_lag", "nothing follows on a single node")
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
