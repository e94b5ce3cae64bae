package node

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
)

// TestValidateInterBroker: a secured cluster must be able to reach its
// peers' listeners and keep its gossip private; the settings that only
// mean something on a cluster or a SASL listener are refused elsewhere.
func TestValidateInterBroker(t *testing.T) {
	peers := ClusterConfig{Peers: []Peer{{ID: 1, Addr: "127.0.0.1:9093"}, {ID: 2, Addr: "127.0.0.1:9193"}}}
	key := make([]byte, 32)
	ib := InterBrokerConfig{User: "broker", Password: "pw"}
	for _, tc := range []struct {
		name string
		c    Config
		want string // "" = valid
	}{
		{"single node, plain", Config{}, ""},
		{"single node with an inter-broker user", Config{InterBroker: ib}, "apply to a cluster"},
		{"plain cluster", Config{Cluster: peers}, ""},
		{"SASL cluster without a user", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLPlaintext}, "needs inter-broker-user"},
		{"SASL cluster", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLPlaintext, InterBroker: ib}, ""},
		{"mechanism not offered", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLPlaintext,
			InterBroker: InterBrokerConfig{User: "b", Password: "p", Mechanism: "PLAIN"}}, "not among sasl-mechanisms"},
		{"unknown mechanism", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLPlaintext,
			InterBroker: InterBrokerConfig{User: "b", Password: "p", Mechanism: "GSSAPI"}}, "want SCRAM-SHA-256"},
		{"user on SSL", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSSL, InterBroker: ib}, "applies to SASL_PLAINTEXT and SASL_SSL"},
		{"TLS cluster without a gossip key", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSSL}, "needs gossip-key"},
		{"TLS cluster", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSSL, GossipKey: key}, ""},
		{"bad key", Config{Cluster: peers, GossipKey: key[:7]}, "gossip-key of 7 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.validateInterBroker()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}

	// The SASL cluster's gossip key comes from the inter-broker secret:
	// the same on every node, another for another password.
	c := Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, InterBroker: ib}
	require.Len(t, c.gossipKey(), 32)
	other := c
	other.InterBroker.Password = "other"
	require.NotEqual(t, c.gossipKey(), other.gossipKey())
	require.Equal(t, auth.MechScramSHA512, c.interBrokerMechanism())
	c.SASL.Mechanisms = []string{auth.MechScramSHA256}
	require.Equal(t, auth.MechScramSHA256, c.interBrokerMechanism())
}
