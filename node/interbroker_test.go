package node

import (
	"crypto/x509/pkix"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonmq/moonmq/internal/testcerts"
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
		{"SASL_PLAINTEXT cluster", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLPlaintext, InterBroker: ib, GossipKey: key}, "use security-protocol SASL_SSL"},
		{"SASL cluster without a user", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, GossipKey: key}, "needs inter-broker-user"},
		{"SASL cluster without a gossip key", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, InterBroker: ib}, "needs gossip-key"},
		{"SASL cluster", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, InterBroker: ib, GossipKey: key}, ""},
		{"mechanism not offered", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, GossipKey: key,
			InterBroker: InterBrokerConfig{User: "b", Password: "p", Mechanism: "PLAIN"}}, "not among sasl-mechanisms"},
		{"unknown mechanism", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, GossipKey: key,
			InterBroker: InterBrokerConfig{User: "b", Password: "p", Mechanism: "GSSAPI"}}, "want SCRAM-SHA-256"},
		{"user on SSL", Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSSL, InterBroker: ib, GossipKey: key}, "applies to SASL_SSL"},
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

	c := Config{Cluster: peers, SecurityProtocol: kafka.ProtocolSASLSSL, InterBroker: ib}
	require.Equal(t, auth.MechScramSHA512, c.interBrokerMechanism())
	c.SASL.Mechanisms = []string{auth.MechScramSHA256}
	require.Equal(t, auth.MechScramSHA256, c.interBrokerMechanism())
}

// TestClusterPeerAllowed: the cluster port admits this node's own subject
// and super users' certificates, not another client certificate of the
// same CA, not even one with the brokers' CN in another subject.
func TestClusterPeerAllowed(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	broker := ca.Server(t, "broker")
	cert, key := broker.Write(t, dir, "broker")
	tm, err := auth.LoadTLS(auth.TLSOptions{CertFile: cert, KeyFile: key, ClientCAFile: ca.Write(t, dir, "ca")})
	require.NoError(t, err)
	n := &Node{tls: tm, cfg: Config{Authz: AuthzConfig{SuperUsers: []string{"User:ops"}}}}

	require.NoError(t, n.clusterPeerAllowed(ca.Server(t, "broker").Cert), "another node's certificate, same subject")
	require.NoError(t, n.clusterPeerAllowed(ca.Client(t, pkix.Name{CommonName: "ops"}).Cert), "a super user")
	require.ErrorContains(t, n.clusterPeerAllowed(ca.Client(t, pkix.Name{CommonName: "app"}).Cert), "not a broker's")
	require.Error(t, n.clusterPeerAllowed(ca.Client(t, pkix.Name{CommonName: "broker", OrganizationalUnit: []string{"apps"}}).Cert),
		"the brokers' CN in another subject")
}
