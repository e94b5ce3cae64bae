package node

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moonmq/moonmq/cluster/controller"
	"github.com/moonmq/moonmq/cluster/membership"
)

// Peer is one voter of the controller quorum: its node id and the address
// its cluster (raft) listener is reached at. The address may be a proxy in
// front of the listener, so it is never assumed to equal ClusterListen.
type Peer struct {
	ID   int32
	Addr string
}

func (p Peer) String() string { return fmt.Sprintf("%d@%s", p.ID, p.Addr) }

// ClusterConfig makes a node one of a cluster. The zero value is a
// one-node cluster: the node is the only voter, on an in-memory raft
// transport, with no gossip.
type ClusterConfig struct {
	// Peers is the static controller quorum (--peers). A node in it is a
	// voter and a broker; empty: a one-voter cluster.
	Peers []Peer
	// ClusterListen is the raft listener's address (default: this node's
	// Peers entry). GossipListen is memberlist's (default: the cluster
	// host, cluster port + 1). Join are gossip seeds (default: every other
	// peer's host with its cluster port + 1).
	ClusterListen string
	GossipListen  string
	Join          []string
	// SessionTimeout fences a broker unreachable that long (default 6s).
	SessionTimeout time.Duration
	// DefaultReplicationFactor is used for topics created with -1
	// (default: min(3, len(Peers)), 1 without peers).
	DefaultReplicationFactor int16
	// Rack is this broker's rack (empty: none).
	Rack string
}

// Clustered reports whether the node has peers to replicate with.
func (c ClusterConfig) Clustered() bool { return len(c.Peers) > 0 }

// withDefaults fills the derived addresses and the defaults; validate
// checks the result.
func (c ClusterConfig) withDefaults(nodeID int32) ClusterConfig {
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 6 * time.Second
	}
	if c.DefaultReplicationFactor == 0 {
		c.DefaultReplicationFactor = int16(max(1, min(3, len(c.Peers))))
	}
	if !c.Clustered() {
		return c
	}
	if c.ClusterListen == "" {
		if i := slices.IndexFunc(c.Peers, func(p Peer) bool { return p.ID == nodeID }); i >= 0 {
			c.ClusterListen = c.Peers[i].Addr
		}
	}
	if c.GossipListen == "" {
		c.GossipListen = nextPort(c.ClusterListen)
	}
	if c.Join == nil {
		for _, p := range c.Peers {
			if p.ID != nodeID {
				c.Join = append(c.Join, nextPort(p.Addr))
			}
		}
	}
	return c
}

// nextPort is host:port+1, or "" when addr is not host:port (validate
// reports the address itself).
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n >= 65535 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// validate checks a config after withDefaults.
func (c ClusterConfig) validate(nodeID int32) error {
	if c.SessionTimeout < 0 {
		return fmt.Errorf("broker-session-timeout %v: must be positive", c.SessionTimeout)
	}
	if c.DefaultReplicationFactor < 1 {
		return fmt.Errorf("default-replication-factor %d: must be at least 1", c.DefaultReplicationFactor)
	}
	if !c.Clustered() {
		if c.ClusterListen != "" || c.GossipListen != "" || len(c.Join) > 0 {
			return fmt.Errorf("cluster-listen, gossip-listen and join need --peers (the controller quorum)")
		}
		if c.DefaultReplicationFactor > 1 {
			return fmt.Errorf("default-replication-factor %d: a node without --peers has one replica of each partition", c.DefaultReplicationFactor)
		}
		return nil
	}
	ids, addrs := map[int32]bool{}, map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if err := checkHostPort(p.Addr); err != nil {
			return fmt.Errorf("peers: entry %s: %v", p, err)
		}
		if ids[p.ID] {
			return fmt.Errorf("peers: node id %d is listed twice", p.ID)
		}
		if addrs[p.Addr] {
			return fmt.Errorf("peers: address %s is listed twice", p.Addr)
		}
		ids[p.ID], addrs[p.Addr] = true, true
		self = self || p.ID == nodeID
	}
	if !self {
		return fmt.Errorf("peers: node-id %d is not in --peers %s; every node of this release is a voter, so list it", nodeID, peersString(c.Peers))
	}
	if int(c.DefaultReplicationFactor) > len(c.Peers) {
		return fmt.Errorf("default-replication-factor %d: more than the %d brokers in --peers", c.DefaultReplicationFactor, len(c.Peers))
	}
	for name, addr := range map[string]string{"cluster-listen": c.ClusterListen, "gossip-listen": c.GossipListen} {
		if err := checkHostPort(addr); err != nil {
			return fmt.Errorf("%s %q: %v", name, addr, err)
		}
	}
	for _, seed := range c.Join {
		if err := checkHostPort(seed); err != nil {
			return fmt.Errorf("join: seed %q: %v", seed, err)
		}
	}
	return nil
}

func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return fmt.Errorf("want HOST:PORT with a host and a port from 1 to 65535")
	}
	return nil
}

func peersString(peers []Peer) string {
	s := make([]string, len(peers))
	for i, p := range peers {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// handOverTimeout bounds a controlled shutdown's wait for the controller:
// a node cut off from the quorum still stops, its partitions then fail
// over by the session timeout instead.
const handOverTimeout = 5 * time.Second

// handOver is a clustered node's controlled shutdown: the controller moves
// every leadership it holds to another in-sync replica and takes it out of
// the ISRs, so producers see a retriable NOT_LEADER_OR_FOLLOWER and the
// new leader at once instead of waiting out the session timeout; the node
// waits until it reconciled that, so it no longer leads anything when its
// listener closes.
func (n *Node) handOver(ctx context.Context) {
	if n.members == nil {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, handOverTimeout)
	defer cancel()
	if err := n.ctrl.ControlledShutdown(ctx, n.cfg.NodeID); err != nil {
		n.log.Warn("controlled shutdown: could not hand over leadership; the partitions fail over after the session timeout", "err", err)
		return
	}
	if err := n.rec.wait(ctx, n.ctrl.AppliedIndex()); err != nil {
		n.log.Warn("controlled shutdown: leadership moved, but this node had not applied it yet", "err", err)
		return
	}
	n.log.Info("controlled shutdown: leadership handed over", "took", time.Since(start).Round(time.Millisecond))
}

// The gossip membership is the controller's liveness input, with the time
// each broker was last heard from.
var _ controller.ContactLiveness = (*membership.Membership)(nil)
