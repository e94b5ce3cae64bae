package node

import (
	"net"
	"slices"
	"strconv"

	"github.com/moonmq/moonmq/cluster/metadata"
	"github.com/moonmq/moonmq/engine/topicconfig"
	"github.com/moonmq/moonmq/net/httpapi"
)

// replicationCounts are the partition counts of the /stats "cluster"
// object and the cluster metric families.
type replicationCounts struct {
	// Over the partitions the metadata assigns to this node (Kafka's
	// per-broker ReplicaManager gauges): how many it holds a replica of,
	// leads, and, of those it leads, how many have an ISR smaller than
	// their replicas or than min.insync.replicas.
	assigned, led, underReplicated, underMinISR int
	// clusterOffline counts every partition of the cluster without a
	// leader (Kafka's OfflinePartitionsCount, which only the active
	// controller exports: the caller decides).
	clusterOffline int
}

// countReplication counts over topics, the metadata as this node
// reconciled it, for broker self. The ISR counted is the committed one:
// a change a leader proposed counts once the controller committed it and
// this node's reconciler applied it (moments after the controller's
// answer, which waits until the proposer's metadata has it). A node
// without --peers (minISR false) leads every partition alone and
// acknowledges acks=all at its fsync, never refusing one for
// min.insync.replicas: it counts no partition under it.
func countReplication(self int32, topics map[string]metadata.Topic, minISR bool) replicationCounts {
	var c replicationCounts
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Leader == metadata.NoLeader {
				c.clusterOffline++
			}
			if !slices.Contains(p.Replicas, self) {
				continue
			}
			c.assigned++
			if p.Leader != self {
				continue
			}
			c.led++
			if len(p.ISR) < len(p.Replicas) {
				c.underReplicated++
			}
			if minISR && len(p.ISR) < topicconfig.MinInsyncReplicasOf(t.Configs, len(p.Replicas)) {
				c.underMinISR++
			}
		}
	}
	return c
}

// clusterStats is the /stats "cluster" object and the source of the
// cluster metrics. It reads what the controller, the gossip membership and
// the reconciler hold, without waiting on a delta being applied.
func (n *Node) clusterStats() *httpapi.ClusterStats {
	self := n.cfg.NodeID
	rs := n.ctrl.RaftStatus()
	s := &httpapi.ClusterStats{
		NodeID: self, ClusterID: n.ctrl.ClusterID(), ControllerID: n.ctrl.ControllerID(), ActiveController: n.ctrl.IsLeader(),
		Raft: httpapi.RaftStats{State: rs.State, Term: rs.Term, LastLogIndex: rs.LastLogIndex, CommitIndex: rs.CommitIndex,
			AppliedIndex: rs.AppliedIndex},
		Brokers: []httpapi.BrokerStats{},
	}
	for _, b := range n.ctrl.Brokers() {
		s.Brokers = append(s.Brokers, httpapi.BrokerStats{
			ID: b.ID, Address: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), Rack: b.Rack, Fenced: b.Fenced,
			Alive: b.ID == self || (n.members != nil && n.members.Alive(b.ID)),
		})
	}
	c := countReplication(self, n.rec.reconciledTopics(), n.rec.repl != nil)
	s.PartitionsAssigned, s.PartitionsLed = c.assigned, c.led
	s.PartitionsUnderReplicated, s.PartitionsUnderMinISR, s.ClusterPartitionsOffline = c.underReplicated, c.underMinISR, c.clusterOffline
	if n.rec.repl != nil {
		s.ISRShrinks, s.ISRExpands = n.rec.repl.isrChanges()
	}
	return s
}

// addReplication fills the replication fields of the /stats partition
// entries from topics (the metadata as reconciled): leader, epoch,
// replicas, ISR and this replica's role. A partition the metadata does
// not name (its topic is being deleted) keeps the defaults: no leader, no
// role.
func addReplication(stats []httpapi.TopicStats, topics map[string]metadata.Topic, self int32) {
	for i := range stats {
		t, ok := topics[stats[i].Name]
		if !ok {
			continue
		}
		for j := range stats[i].Partitions {
			ps := &stats[i].Partitions[j]
			if int(ps.Partition) >= len(t.Partitions) {
				continue
			}
			mp := t.Partitions[ps.Partition]
			ps.Leader, ps.LeaderEpoch = mp.Leader, mp.LeaderEpoch
			ps.Replicas, ps.ISR = slices.Clone(mp.Replicas), slices.Clone(mp.ISR)
			switch {
			case mp.Leader == self:
				ps.Role = "leader"
			case slices.Contains(mp.Replicas, self):
				ps.Role = "follower"
			}
		}
	}
}
