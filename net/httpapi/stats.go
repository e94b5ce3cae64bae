package httpapi

import (
	"time"

	"github.com/moonmq/moonmq/engine/replica"
)

// Stats is the /stats document. Field names are part of the operator
// interface (documented in the README): add fields, never rename them.
type Stats struct {
	Version       string       `json:"version"`
	NodeID        int32        `json:"node_id"`
	StartedAt     time.Time    `json:"started_at"`
	UptimeSeconds float64      `json:"uptime_seconds"`
	Listeners     Listeners    `json:"listeners"`
	Connections   int          `json:"connections"`
	Topics        []TopicStats `json:"topics"`
	Groups        []GroupStats `json:"groups"`
	// Cluster is the node's view of the cluster: the controller, Raft,
	// the brokers and its replication counts (nil until the node opened).
	Cluster *ClusterStats `json:"cluster,omitempty"`
	// Transactions is the transaction coordinator's view: the
	// transactional ids it coordinates by state, and its counts since
	// start (nil until the node opened).
	Transactions *TransactionStats `json:"transactions,omitempty"`
	// Cleaner is the log cleaner's totals (nil until the node opened).
	Cleaner *CleanerStats `json:"cleaner,omitempty"`
}

// TransactionStats is the /stats "transactions" object, and the source of
// the transaction metric families (NewTransactionCollector).
type TransactionStats struct {
	// ByState counts the transactional ids this node coordinates by the
	// state of their transaction (Empty, Ongoing, PrepareCommit, ...).
	ByState   map[string]int `json:"by_state"`
	Committed int64          `json:"committed"`
	Aborted   int64          `json:"aborted"`
	// TimedOut are the transactions the coordinator aborted because
	// they were open longer than their timeout.
	TimedOut int64 `json:"timed_out"`
	// MarkersPending are end-transaction markers not yet written.
	MarkersPending int `json:"markers_pending"`
}

// ClusterStats is the /stats "cluster" object, and the source of the
// cluster metric families (NewClusterCollector). A node without --peers
// is a one-voter cluster: it is its own active controller, the only
// broker, and leads every partition.
type ClusterStats struct {
	NodeID    int32  `json:"node_id"`
	ClusterID string `json:"cluster_id"`
	// ControllerID is the active controller (the Raft leader) as this
	// node knows it, -1 while there is none; ActiveController says
	// whether it is this node.
	ControllerID     int32         `json:"controller_id"`
	ActiveController bool          `json:"active_controller"`
	Raft             RaftStats     `json:"raft"`
	Brokers          []BrokerStats `json:"brokers"`

	// Over the partitions the metadata this node applied assigns to it:
	// how many it leads and holds a replica of, and of those it leads, how
	// many have an ISR smaller than their replicas or than
	// min.insync.replicas (Kafka's LeaderCount, PartitionCount,
	// UnderReplicatedPartitions, UnderMinIsrPartitionCount).
	PartitionsLed             int `json:"partitions_led"`
	PartitionsAssigned        int `json:"partitions_assigned"`
	PartitionsUnderReplicated int `json:"partitions_under_replicated"`
	PartitionsUnderMinISR     int `json:"partitions_under_min_isr"`
	// ClusterPartitionsOffline counts the partitions of the whole cluster
	// without a leader, in the metadata this node applied (the active
	// controller's is the newest; /metrics exports it only there).
	ClusterPartitionsOffline int `json:"cluster_partitions_offline"`
	// ISRShrinks and ISRExpands count the ISR changes this node's leaders
	// proposed and the controller committed, since the process started.
	ISRShrinks uint64 `json:"isr_shrinks"`
	ISRExpands uint64 `json:"isr_expands"`
}

// RaftStats is the node's Raft state.
type RaftStats struct {
	State        string `json:"state"` // follower, candidate, leader or shutdown
	Term         uint64 `json:"term"`
	LastLogIndex uint64 `json:"last_log_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
}

// BrokerStats is one registered broker.
type BrokerStats struct {
	ID      int32  `json:"id"`
	Address string `json:"address"` // host:port clients reach it at
	Rack    string `json:"rack,omitempty"`
	// Fenced: the controller took its leaderships and ISR memberships
	// away (unreachable for the session timeout, or shut down). Alive:
	// this node hears from it now (gossip; a node always hears itself).
	Fenced bool `json:"fenced"`
	Alive  bool `json:"alive"`
}

// Listeners are the bound and advertised addresses.
type Listeners struct {
	Kafka      string `json:"kafka"`
	Advertised string `json:"advertised"`
	HTTP       string `json:"http"`
}

// TopicStats sums a topic's partitions.
type TopicStats struct {
	Name       string           `json:"name"`
	Records    int64            `json:"records"` // sum of high watermark - log start
	SizeBytes  int64            `json:"size_bytes"`
	Partitions []PartitionStats `json:"partitions"`
}

// PartitionStats is one partition's log state.
type PartitionStats struct {
	Partition      int32 `json:"partition"`
	LogStartOffset int64 `json:"log_start_offset"`
	LogEndOffset   int64 `json:"log_end_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	// LastStableOffset is where read_committed consumers stop: the high
	// watermark unless an open transaction (OpenTransactions of them)
	// holds it back.
	LastStableOffset int64 `json:"last_stable_offset"`
	OpenTransactions int   `json:"open_transactions"`
	SizeBytes        int64 `json:"size_bytes"`
	Segments         int   `json:"segments"`
	// State is "online" or "offline" (it cannot be opened or its log failed
	// an I/O operation; Error says which, and the broker is retrying it).
	State         string             `json:"state"`
	Error         string             `json:"error,omitempty"`
	CorruptRanges []CorruptRangeStat `json:"corrupt_ranges,omitempty"`

	// Replication, as the metadata this node applied says: the leader (-1:
	// none, the partition is offline), its epoch, the replicas and the
	// ISR; Role is this replica's ("leader" or "follower"; absent while
	// the metadata does not name the partition, as during its deletion).
	// FollowerLag, on a follower that has heard from its leader, is the
	// leader's high watermark minus this replica's durable end, in
	// offsets.
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Role        string  `json:"role,omitempty"`
	FollowerLag *int64  `json:"follower_lag,omitempty"`
	// Compaction is the log cleaner's view of a compacted partition
	// (absent on other partitions, and before the cleaner's first pass).
	Compaction *CompactionStats `json:"compaction,omitempty"`
}

// CorruptRangeStat is a damaged stretch of a partition's log: its offsets
// are not served (reads answer CORRUPT_MESSAGE) and nothing is deleted.
type CorruptRangeStat struct {
	FromOffset int64  `json:"from_offset"`
	ToOffset   int64  `json:"to_offset"` // exclusive; -1: to the end of its segment
	Segment    int64  `json:"segment"`
	Reason     string `json:"reason"`
}

// GroupStats is one consumer group's lag.
type GroupStats struct {
	Group      string               `json:"group"`
	State      string               `json:"state"`
	Members    int                  `json:"members"`
	Lag        int64                `json:"lag"`
	Partitions []GroupPartitionStat `json:"partitions,omitempty"`
}

// GroupPartitionStat is a group's position in one partition.
type GroupPartitionStat struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
}

// TopicStatsOf summarises the partitions hosted by b, online or not.
func TopicStatsOf(b *replica.Manager) []TopicStats {
	var out []TopicStats
	for _, ps := range b.PartitionStates() { // sorted by topic, partition
		if len(out) == 0 || out[len(out)-1].Name != ps.Topic {
			out = append(out, TopicStats{Name: ps.Topic, Partitions: []PartitionStats{}})
		}
		t := &out[len(out)-1]
		st := ps.Stats
		p := PartitionStats{
			Partition: ps.Partition, LogStartOffset: st.LogStartOffset, LogEndOffset: st.LogEndOffset,
			HighWatermark: st.HighWatermark, LastStableOffset: ps.LastStable, OpenTransactions: ps.OpenTransactions,
			SizeBytes: st.Size, Segments: st.Segments,
			State: "online", Error: ps.Error,
			Leader: -1, LeaderEpoch: -1, Replicas: []int32{}, ISR: []int32{},
		}
		if ps.Following {
			lag := ps.FollowerLag
			p.FollowerLag = &lag
		}
		if !ps.Online {
			p.State = "offline"
		}
		for _, cr := range ps.CorruptRanges {
			p.CorruptRanges = append(p.CorruptRanges, CorruptRangeStat{FromOffset: cr.FromOffset, ToOffset: cr.ToOffset,
				Segment: cr.Segment, Reason: cr.Reason})
		}
		t.Partitions = append(t.Partitions, p)
		t.Records += st.HighWatermark - st.LogStartOffset
		t.SizeBytes += st.Size
	}
	return out
}
