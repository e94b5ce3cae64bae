package client

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
)

// A broker that hosts replicas but is missing from Metadata's broker list
// is down; partitions count as under-replicated by their ISR and offline
// without a leader.
func TestHealthOf(t *testing.T) {
	m := kadm.Metadata{
		Cluster: "c", Controller: 2,
		Brokers: kadm.BrokerDetails{{NodeID: 2, Host: "h2", Port: 2}, {NodeID: 1, Host: "h1", Port: 1}},
		Topics: kadm.TopicDetails{
			"orders": {Topic: "orders", Partitions: kadm.PartitionDetails{
				0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}},
				1: {Partition: 1, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}},
				2: {Partition: 2, Leader: -1, Replicas: []int32{3, 1, 2}, ISR: []int32{3}},
			}},
		},
	}
	h := healthOf(m)
	require.Equal(t, []int32{1, 2}, []int32{h.Brokers[0].ID, h.Brokers[1].ID})
	require.Equal(t, []int32{3}, h.Down)
	require.Equal(t, 3, h.Partitions)
	require.Equal(t, 2, h.UnderReplicated)
	require.Equal(t, 1, h.Offline)
	require.Equal(t, map[int32]int{1: 1, 2: 1}, h.Leaders)
	require.Equal(t, map[int32]int{1: 3, 2: 3, 3: 3}, h.Replicas)
	require.Equal(t, int32(2), h.Controller)
}
