package node

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClusterConfigDefaults(t *testing.T) {
	peers := []Peer{{1, "127.0.0.1:9093"}, {2, "127.0.0.1:9193"}, {3, "127.0.0.1:9293"}}
	c := ClusterConfig{Peers: peers}.withDefaults(2)
	require.Equal(t, "127.0.0.1:9193", c.ClusterListen)
	require.Equal(t, "127.0.0.1:9194", c.GossipListen)
	require.Equal(t, []string{"127.0.0.1:9094", "127.0.0.1:9294"}, c.Join)
	require.Equal(t, 6*time.Second, c.SessionTimeout)
	require.EqualValues(t, 3, c.DefaultReplicationFactor)
	require.NoError(t, c.validate(2))

	// Explicit values win; the gossip default follows --cluster-listen.
	c = ClusterConfig{Peers: peers, ClusterListen: "127.0.0.1:7000", Join: []string{}}.withDefaults(1)
	require.Equal(t, "127.0.0.1:7001", c.GossipListen)
	require.Empty(t, c.Join)

	one := ClusterConfig{}.withDefaults(1)
	require.EqualValues(t, 1, one.DefaultReplicationFactor)
	require.NoError(t, one.validate(1))
	two := ClusterConfig{Peers: peers[:2]}.withDefaults(1)
	require.EqualValues(t, 2, two.DefaultReplicationFactor)
}

func TestClusterConfigRefusals(t *testing.T) {
	peers := []Peer{{1, "127.0.0.1:9093"}, {2, "127.0.0.1:9193"}}
	for _, tc := range []struct {
		name string
		c    ClusterConfig
		id   int32
		want string
	}{
		{"not a voter", ClusterConfig{Peers: peers}, 3, "node-id 3 is not in --peers 1@127.0.0.1:9093,2@127.0.0.1:9193"},
		{"duplicate id", ClusterConfig{Peers: []Peer{{1, "127.0.0.1:1"}, {1, "127.0.0.1:2"}}}, 1, "node id 1 is listed twice"},
		{"duplicate address", ClusterConfig{Peers: []Peer{{1, "127.0.0.1:1"}, {2, "127.0.0.1:1"}}}, 1, "address 127.0.0.1:1 is listed twice"},
		{"bad address", ClusterConfig{Peers: []Peer{{1, "nowhere"}}}, 1, "peers: entry 1@nowhere: want HOST:PORT"},
		{"bad seed", ClusterConfig{Peers: peers, Join: []string{"x"}}, 1, `join: seed "x"`},
		{"rf above peers", ClusterConfig{Peers: peers, DefaultReplicationFactor: 3}, 1, "default-replication-factor 3: more than the 2 brokers"},
		{"listen without peers", ClusterConfig{ClusterListen: "127.0.0.1:9093"}, 1, "need --peers"},
		{"rf without peers", ClusterConfig{DefaultReplicationFactor: 2}, 1, "one replica of each partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.withDefaults(tc.id).validate(tc.id)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
