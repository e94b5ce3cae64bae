package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/moonmq/moonmq/node"
)

// clusterFlags are the settings that make a node one of a cluster. Their
// names are a contract (scripts and other tools drive them): --peers,
// --cluster-listen, --gossip-listen, --join, --broker-session-timeout,
// --default-replication-factor, --rack.
type clusterFlags struct {
	peers, clusterListen, gossipListen, join string
	rack                                     string
	sessionTimeout                           time.Duration
	defaultRF                                int

	parsed []node.Peer // set by validate
	seeds  []string
}

func (c *clusterFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&c.peers, "peers", "",
		"the controller quorum: every voter as ID@HOST:PORT (its cluster address), comma-separated; empty: a one-node cluster")
	fs.StringVar(&c.clusterListen, "cluster-listen", "", "this node's cluster (raft) listener address (default: its own --peers entry)")
	fs.StringVar(&c.gossipListen, "gossip-listen", "", "this node's gossip (memberlist) address (default: the cluster host, cluster port + 1)")
	fs.StringVar(&c.join, "join", "", "gossip seeds, HOST:PORT comma-separated (default: every other peer's cluster host, cluster port + 1)")
	fs.DurationVar(&c.sessionTimeout, "broker-session-timeout", 6*time.Second,
		"a broker unreachable this long is fenced and its partitions' leadership moves to other in-sync replicas")
	fs.IntVar(&c.defaultRF, "default-replication-factor", 0,
		"replicas of topics created with replication factor -1 (0: min(3, the number of --peers))")
	fs.StringVar(&c.rack, "rack", "", "this broker's rack; replicas of a partition are spread over racks")
}

// validate parses the lists; a mistake names the flag and the entry.
func (c *clusterFlags) validate(nodeID int32) error {
	c.parsed, c.seeds = nil, nil
	if c.peers != "" {
		for entry := range strings.SplitSeq(c.peers, ",") {
			entry = strings.TrimSpace(entry)
			id, addr, ok := strings.Cut(entry, "@")
			n, err := strconv.ParseInt(id, 10, 32)
			if !ok || err != nil || n < 0 || addr == "" {
				return fmt.Errorf("peers: entry %q: want ID@HOST:PORT, e.g. 1@127.0.0.1:9093", entry)
			}
			c.parsed = append(c.parsed, node.Peer{ID: int32(n), Addr: addr})
		}
	}
	if c.join != "" {
		for seed := range strings.SplitSeq(c.join, ",") {
			if seed = strings.TrimSpace(seed); seed != "" {
				c.seeds = append(c.seeds, seed)
			}
		}
	}
	switch {
	case c.sessionTimeout < 100*time.Millisecond || c.sessionTimeout > 10*time.Minute:
		return fmt.Errorf("broker-session-timeout %v: must be between 100ms and 10m", c.sessionTimeout)
	case c.defaultRF < 0 || c.defaultRF > 32767:
		return fmt.Errorf("default-replication-factor %d: must be between 0 (automatic) and 32767", c.defaultRF)
	}
	return nil
}

func (c *clusterFlags) config() node.ClusterConfig {
	return node.ClusterConfig{
		Peers: c.parsed, ClusterListen: c.clusterListen, GossipListen: c.gossipListen, Join: c.seeds,
		SessionTimeout: c.sessionTimeout, DefaultReplicationFactor: int16(c.defaultRF), Rack: c.rack,
	}
}
