package kafka

import (
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/replica"
	"github.com/moonmq/moonmq/engine/vfs"
)

// fakeMeta is the metadata of a three-broker cluster as node 2 has it;
// only the reads Metadata makes are implemented.
type fakeMeta struct {
	Metadata
	topics  []metadata.Topic
	brokers []metadata.Broker
}

func (f *fakeMeta) Topics() []metadata.Topic            { return f.topics }
func (f *fakeMeta) Brokers() []metadata.Broker          { return f.brokers }
func (f *fakeMeta) ClusterID() string                   { return "c" }
func (f *fakeMeta) ControllerID() int32                 { return 1 }
func (f *fakeMeta) Topic(string) (metadata.Topic, bool) { return metadata.Topic{}, false }

// On a cluster, Metadata answers every partition's leader and offline
// replicas as the controller has them, whichever node answers: the
// replicas reported offline and those on fenced brokers, never this
// node's own view of its replica (a replica it could not open is the
// controller's to know, once this node reported it). A single node
// answers from its own replicas.
func TestMetadataOfflineReplicas(t *testing.T) {
	faults := vfs.NewFaults(vfs.NewMem())
	faults.SetInjector(func(_ vfs.Op, path string) error {
		if strings.Contains(path, "/t-1") {
			return syscall.EIO
		}
		return nil
	})
	b, err := replica.Open(replica.Options{DataDir: "/data", FS: faults, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	_, err = b.EnsurePartition(replica.TopicPartition{Topic: "t", Partition: 0}, nil)
	require.NoError(t, err)
	_, err = b.EnsurePartition(replica.TopicPartition{Topic: "t", Partition: 1}, nil)
	require.ErrorIs(t, err, replica.ErrPartitionOffline, "node 2's replica of t-1 cannot be opened")

	meta := &fakeMeta{
		brokers: []metadata.Broker{{ID: 1, Host: "a", Port: 1}, {ID: 2, Host: "b", Port: 2}, {ID: 3, Host: "c", Port: 3, Fenced: true}},
		topics: []metadata.Topic{{Name: "t", Partitions: []metadata.Partition{
			{ID: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 4, ISR: []int32{1}, Offline: []int32{2}},
			{ID: 1, Replicas: []int32{2, 1}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}},
		}}},
	}
	answer := func(clustered bool) []kmsg.MetadataResponseTopicPartition {
		s := &Server{opts: Options{NodeID: 2, Clustered: clustered}, meta: meta, broker: b, advHost: "b", advPort: 2}
		c := &conn{s: s}
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		resp := c.metadata(req, authz{c: c})
		require.Len(t, resp.Topics, 1)
		return resp.Topics[0].Partitions
	}

	ps := answer(true)
	require.EqualValues(t, 1, ps[0].Leader)
	require.Equal(t, []int32{2, 3}, ps[0].OfflineReplicas, "reported offline, and on a fenced broker")
	require.Zero(t, ps[0].ErrorCode)
	require.EqualValues(t, 1, ps[1].Leader, "another node leads it: this node's replica does not change that")
	require.Equal(t, []int32{}, ps[1].OfflineReplicas)
	require.Zero(t, ps[1].ErrorCode)

	ps = answer(false)
	require.Equal(t, []int32{}, ps[0].OfflineReplicas, "a single node has no other replicas to know about")
	require.Equal(t, kerr.LeaderNotAvailable.Code, ps[1].ErrorCode)
	require.EqualValues(t, -1, ps[1].Leader)
	require.Equal(t, []int32{2}, ps[1].OfflineReplicas)
}
