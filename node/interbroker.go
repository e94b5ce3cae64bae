package node

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/moonmq/moonmq/net/auth"
	"github.com/moonmq/moonmq/net/kafka"
)

// InterBrokerConfig is how this node authenticates to the other brokers'
// Kafka listeners when they require SASL (follower fetches, transaction
// markers and verifications): every node of a SASL cluster has the same
// user, which is created at start like a bootstrap user and is a super
// user (brokers need CLUSTER_ACTION, and read and write every partition).
type InterBrokerConfig struct {
	User, Password string
	// Mechanism is the SASL mechanism the node logs in with: one of the
	// listener's SCRAM mechanisms or PLAIN (default: SCRAM-SHA-512 when
	// offered, else SCRAM-SHA-256).
	Mechanism string
}

// Principal is the inter-broker principal ("" without a user).
func (c InterBrokerConfig) Principal() string {
	if c.User == "" {
		return ""
	}
	return "User:" + c.User
}

// interBrokerMechanism is the mechanism the node uses with its peers.
func (c Config) interBrokerMechanism() string {
	if c.InterBroker.Mechanism != "" {
		return c.InterBroker.Mechanism
	}
	offered := c.saslMechanisms()
	if slices.Contains(offered, auth.MechScramSHA512) || !slices.Contains(offered, auth.MechScramSHA256) {
		return auth.MechScramSHA512
	}
	return auth.MechScramSHA256
}

// saslMechanisms are the mechanisms the SASL listeners offer: --sasl-mechanisms,
// or kafka.DefaultSASLMechanisms when it names none.
func (c Config) saslMechanisms() []string {
	if len(c.SASL.Mechanisms) == 0 {
		return kafka.DefaultSASLMechanisms
	}
	return c.SASL.Mechanisms
}

// validateInterBroker checks that a clustered node can reach its peers'
// listeners and keep the cluster's own traffic private: on a SASL listener
// it needs the inter-broker user, with a mechanism the listeners offer, and
// TLS (SASL_SSL: on SASL_PLAINTEXT Raft and the controller RPC, which
// change ACLs and credentials, would run unauthenticated and in clear); a
// secured cluster needs a gossip key.
func (c Config) validateInterBroker() error {
	p, err := kafka.ParseSecurityProtocol(string(c.SecurityProtocol))
	if err != nil {
		return nil // validateSecurity reports it
	}
	if !c.Cluster.Clustered() {
		if c.InterBroker.User != "" || len(c.GossipKey) > 0 {
			return errors.New("inter-broker-user and gossip-key apply to a cluster (--peers)")
		}
		return nil
	}
	if p == kafka.ProtocolSASLPlaintext {
		return errors.New("a cluster on SASL_PLAINTEXT would run Raft and the controller RPC (which change ACLs and credentials) unauthenticated and in clear: use security-protocol SASL_SSL, whose cluster port runs mutual TLS")
	}
	if p.SASL() {
		if c.InterBroker.User == "" || c.InterBroker.Password == "" {
			return fmt.Errorf("a cluster on a %s listener needs inter-broker-user NAME:PASSWORD: the nodes log in to each other's listeners with it (the same on every node)", p)
		}
		mech, offered := c.interBrokerMechanism(), c.saslMechanisms()
		switch {
		case mech != auth.MechScramSHA256 && mech != auth.MechScramSHA512 && mech != auth.MechPlain:
			return fmt.Errorf("inter-broker-mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", mech)
		case !slices.Contains(offered, mech):
			return fmt.Errorf("inter-broker-mechanism %s is not among sasl-mechanisms %v: the peers' listeners would refuse it", mech, offered)
		}
	} else if c.InterBroker.User != "" {
		return fmt.Errorf("inter-broker-user applies to SASL_SSL listeners, not %s (on SSL the nodes present their certificates)", p)
	}
	if n := len(c.GossipKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("gossip-key of %d bytes: want 16, 24 or 32 (base64)", n)
	}
	if (p.TLS() || p.SASL()) && len(c.GossipKey) == 0 {
		return errors.New("a secured cluster needs gossip-key (16, 24 or 32 random bytes, base64: openssl rand -base64 32; the same on every node): gossip between the nodes is encrypted with it")
	}
	return nil
}

// brokerPrincipals are the principals this node's peers act as on its
// listener: the inter-broker user, and on a cluster the principal of this
// node's own certificate (the one it presents to them on an mTLS listener;
// nodes with certificates of other subjects need theirs in --superusers).
// They are super users: a broker replicates every partition and writes
// markers. With the default mapping (User:<CN>) a client certificate with
// the brokers' CN would be one too: the CA must not issue such.
func (n *Node) brokerPrincipals() []string {
	var ps []string
	if p := n.cfg.InterBroker.Principal(); p != "" {
		ps = append(ps, p)
	}
	if n.cfg.Cluster.Clustered() && n.tls != nil && n.tls.ClientAuth() != auth.ClientAuthNone {
		if p, ok, err := n.tls.LeafPrincipal(); err == nil && ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// peerDial is how this node reaches the other brokers' Kafka listeners
// (follower fetches, transaction markers and verifications): over TLS,
// presenting its own certificate, when the listeners are TLS (every node
// of a cluster runs the same security protocol), then logged in as the
// inter-broker user when they are SASL; nil is the peers' default, plain
// TCP.
func (n *Node) peerDial() func(ctx context.Context, addr string) (net.Conn, error) {
	p := n.cfg.SecurityProtocol
	if n.tls == nil && !p.SASL() {
		return nil
	}
	d := &auth.BrokerDialer{Timeout: 10 * time.Second, ClientID: fmt.Sprintf("moonmq-broker-%d", n.cfg.NodeID)}
	if n.tls != nil {
		d.DialTLS = n.tls.Dial
	}
	if p.SASL() {
		d.Mechanism, d.User, d.Password = n.cfg.interBrokerMechanism(), n.cfg.InterBroker.User, n.cfg.InterBroker.Password
	}
	return d.Dial
}

// clusterPeerAllowed admits a verified certificate to the cluster port
// (Raft, and the controller RPC that changes topics, ACLs and credentials)
// only when it is a broker's: the same subject (whole DN) as this node's own
// certificate, or a certificate whose principal is a super user. A Kafka
// client with a certificate of the same CA is refused there.
func (n *Node) clusterPeerAllowed(cert *x509.Certificate) error {
	if n.tls.SameSubject(cert) {
		return nil
	}
	if p, err := n.tls.PrincipalOf(cert); err == nil && slices.Contains(n.cfg.Authz.SuperUsers, p) {
		return nil
	}
	return fmt.Errorf("cluster port: the certificate of %q is not a broker's (not this node's subject, nor a --superusers principal)", cert.Subject.String())
}
