package node

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
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
	offered := c.SASL.Mechanisms
	if len(offered) == 0 {
		offered = kafka.DefaultSASLMechanisms
	}
	if slices.Contains(offered, auth.MechScramSHA512) || !slices.Contains(offered, auth.MechScramSHA256) {
		return auth.MechScramSHA512
	}
	return auth.MechScramSHA256
}

// validateInterBroker checks that a clustered node can reach its peers'
// listeners and keep its gossip private: on a SASL listener it needs the
// inter-broker user, with a mechanism the listeners offer; with TLS or
// SASL it needs a gossip key (given, or derived from the inter-broker
// password).
func (c Config) validateInterBroker() error {
	p := c.SecurityProtocol
	if !c.Cluster.Clustered() {
		if c.InterBroker.User != "" || len(c.GossipKey) > 0 {
			return errors.New("inter-broker-user and gossip-key apply to a cluster (--peers)")
		}
		return nil
	}
	if p.SASL() {
		if c.InterBroker.User == "" || c.InterBroker.Password == "" {
			return fmt.Errorf("a cluster on a %s listener needs inter-broker-user NAME:PASSWORD: the nodes log in to each other's listeners with it (the same on every node)", p)
		}
		mech := c.interBrokerMechanism()
		offered := c.SASL.Mechanisms
		if len(offered) == 0 {
			offered = kafka.DefaultSASLMechanisms
		}
		switch {
		case mech != auth.MechScramSHA256 && mech != auth.MechScramSHA512 && mech != auth.MechPlain:
			return fmt.Errorf("inter-broker-mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", mech)
		case !slices.Contains(offered, mech):
			return fmt.Errorf("inter-broker-mechanism %s is not among sasl-mechanisms %v: the peers' listeners would refuse it", mech, offered)
		}
	} else if c.InterBroker.User != "" {
		return fmt.Errorf("inter-broker-user applies to SASL_PLAINTEXT and SASL_SSL listeners, not %s (on SSL the nodes present their certificates)", p)
	}
	if n := len(c.GossipKey); n != 0 && n != 16 && n != 24 && n != 32 {
		return fmt.Errorf("gossip-key of %d bytes: want 16, 24 or 32 (base64)", n)
	}
	if (p.TLS() || p.SASL()) && c.gossipKey() == nil {
		return errors.New("a secured cluster needs gossip-key (16, 24 or 32 random bytes, base64; the same on every node): gossip between the nodes is encrypted with it")
	}
	return nil
}

// gossipKey is the key gossip is encrypted with: the configured one, or on
// a SASL cluster one derived from the inter-broker password (a secret
// every node already shares); nil: gossip in clear.
func (c Config) gossipKey() []byte {
	if len(c.GossipKey) > 0 {
		return c.GossipKey
	}
	if c.SecurityProtocol.SASL() && c.InterBroker.Password != "" {
		sum := sha256.Sum256([]byte("moonmq gossip key\x00" + c.InterBroker.User + "\x00" + c.InterBroker.Password))
		return sum[:]
	}
	return nil
}

// brokerPrincipals are the principals this node's peers act as on its
// listener: the inter-broker user, and the principal of this node's own
// certificate (the one it presents to them on an mTLS listener; nodes with
// certificates of other subjects need theirs in --superusers). They are
// super users: a broker replicates every partition and writes markers.
func (n *Node) brokerPrincipals() []string {
	var ps []string
	if p := n.cfg.InterBroker.Principal(); p != "" {
		ps = append(ps, p)
	}
	if n.tls != nil && n.tls.ClientAuth() != auth.ClientAuthNone {
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
	if tm := n.tls; tm != nil {
		d.TLS = func() *tls.Config { return tm.ClientConfig("") }
	}
	if p.SASL() {
		d.Mechanism, d.User, d.Password = n.cfg.interBrokerMechanism(), n.cfg.InterBroker.User, n.cfg.InterBroker.Password
	}
	return d.Dial
}
