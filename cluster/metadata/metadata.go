// Package metadata is the cluster metadata as its readers see it: the
// image types (Topic, Partition, Broker), the typed changes the controller
// publishes in ordered Deltas, the config operations a writer asks for,
// the security metadata's types and Kafka's rules for them (ACL bindings
// and filters, SCRAM credentials, client quotas: security.go, acls.go,
// quotas.go), and the sentinel errors of metadata requests. It is a leaf: the controller
// (cluster/controller) produces these values, and the Kafka front end
// (net/kafka) and the node's reconciler consume them, without the front end
// depending on how the metadata is replicated.
//
// Invariants: values are plain data; whoever hands one out hands out a
// copy (Clone), so a receiver may keep and modify it.
package metadata

import (
	"errors"
	"maps"
	"slices"
)

// Sentinel errors of metadata requests. net/kafka maps them to Kafka error
// codes.
var (
	ErrTopicExists              = errors.New("topic already exists")                   // TOPIC_ALREADY_EXISTS
	ErrUnknownTopic             = errors.New("unknown topic")                          // UNKNOWN_TOPIC_OR_PARTITION
	ErrInvalidPartitions        = errors.New("invalid number of partitions")           // INVALID_PARTITIONS
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")             // INVALID_REPLICATION_FACTOR
	ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")             // INVALID_REPLICA_ASSIGNMENT
	ErrInvalidTopicName         = errors.New("invalid topic name")                     // INVALID_TOPIC_EXCEPTION
	ErrNotController            = errors.New("this node is not the active controller") // NOT_CONTROLLER
	ErrInvalidRequest           = errors.New("invalid request")                        // INVALID_REQUEST
	ErrProducerIDsExhausted     = errors.New("producer id space exhausted")            // UNKNOWN_SERVER_ERROR
	ErrClosed                   = errors.New("controller closed")                      // NOT_CONTROLLER
	// ErrFencedLeaderEpoch: an AlterPartition from a broker that is not the
	// partition's leader, or names a leader epoch other than the current
	// one (FENCED_LEADER_EPOCH).
	ErrFencedLeaderEpoch = errors.New("fenced leader epoch")
	// ErrInvalidUpdateVersion: an AlterPartition based on a partition epoch
	// other than the current one (INVALID_UPDATE_VERSION).
	ErrInvalidUpdateVersion = errors.New("partition epoch does not match")
	// ErrIneligibleReplica: an AlterPartition adds to the ISR a broker
	// that is fenced or not a replica (INELIGIBLE_REPLICA, KIP-841).
	ErrIneligibleReplica = errors.New("ineligible replica")
	// ErrBrokerNotAvailable: the request names a broker that is not
	// registered (BROKER_NOT_AVAILABLE).
	ErrBrokerNotAvailable = errors.New("broker not available")
	// ErrInvalidConfig is returned for a bad topic config (INVALID_CONFIG).
	// The controller's config errors also match engine/topicconfig's
	// ErrInvalid.
	ErrInvalidConfig = errors.New("invalid topic config")
)

// MaxPartitions bounds one topic's partition count. Kafka has no hard
// limit; this one keeps a typo (1e9 partitions) from taking a node down
// creating directories.
const MaxPartitions = 10000

// Internal topic names, as Kafka spells them.
const (
	ConsumerOffsetsTopic  = "__consumer_offsets"
	TransactionStateTopic = "__transaction_state"
)

// IsInternalTopic reports whether name is one of Kafka's internal topics.
func IsInternalTopic(name string) bool {
	return name == ConsumerOffsetsTopic || name == TransactionStateTopic
}

// Topic is the replicated description of a topic.
type Topic struct {
	Name string
	// ID is a random UUID chosen when the topic is created; a topic
	// deleted and created again under the same name has a new one.
	ID         [16]byte
	Partitions []Partition // index == partition id
	Configs    map[string]string
	Internal   bool // __consumer_offsets, __transaction_state
}

// Partition is one partition's replica assignment and leadership.
type Partition struct {
	ID       int32
	Replicas []int32
	Leader   int32
	// LeaderEpoch grows by one each time the leader changes; a replica
	// stamps it on the batches it appends as leader.
	LeaderEpoch int32
	ISR         []int32
	// PartitionEpoch grows by one on every change of the partition's
	// leader, ISR or replicas (Kafka's partition epoch): an ISR change a
	// leader proposes (AlterPartition) names the epoch it was based on, so
	// a proposal made against an older state is refused.
	PartitionEpoch int32
	// Offline are the replicas whose broker reported that their storage
	// failed (a log that failed a write or an fsync, or could not be
	// opened: Kafka's offline log directory, KIP-858, per partition),
	// in replica order; nil when none. Their broker reports them online
	// again once the log is back.
	//
	// Invariants: Offline holds distinct members of Replicas; the Leader
	// is never one of them; an offline replica is never elected or added
	// to the ISR, and it is in the ISR only as its last member (an ISR is
	// never empty), in which case the partition has no leader until a
	// member can lead again.
	Offline []int32
}

// NoLeader is the Leader of a partition none of whose ISR members is
// alive: it is offline until one returns (unclean election is off).
const NoLeader int32 = -1

// AlterPartitionRequest is a partition leader's proposal of a new ISR
// (Kafka's AlterPartition): it names the leader epoch and partition epoch
// it is based on, so the controller refuses it if either has moved on.
type AlterPartitionRequest struct {
	Topic          string
	TopicID        [16]byte // zero: match by name only
	Partition      int32
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
}

// Broker is a registered broker: where clients reach it, and whether the
// controller considers it alive.
type Broker struct {
	ID   int32
	Host string
	Port int32
	Rack string // empty: none
	// Fenced is set by the controller when the broker has been unreachable
	// for the session timeout (or shut down): it leads nothing, is not in
	// any ISR it was removed from, and Metadata does not list it.
	Fenced bool
	// Incarnation is chosen at random by each start of the broker's
	// process (KRaft's incarnation id): a registration with another one
	// is a restart, which the controller handles as a fence and an
	// unfence, so the restarted broker leads nothing in the epochs it led
	// before (its unflushed tail may be gone) and rejoins every ISR by
	// catching up. Empty in metadata written before it existed.
	Incarnation string
}

// ReplicationFactor is the number of replicas of the topic's partitions
// (every partition has the same number; 0 for a topic without partitions).
func (t Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// Clone returns a deep copy of t. Its Configs is never nil.
func (t Topic) Clone() Topic {
	out := t
	out.Partitions = make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		out.Partitions[i] = p.Clone()
	}
	out.Configs = maps.Clone(t.Configs)
	if out.Configs == nil {
		out.Configs = map[string]string{}
	}
	return out
}

// Clone returns a deep copy of p.
func (p Partition) Clone() Partition {
	out := p
	out.Replicas = slices.Clone(p.Replicas)
	out.ISR = slices.Clone(p.ISR)
	out.Offline = slices.Clone(p.Offline)
	return out
}

// OpType is an IncrementalAlterConfigs operation; the values are Kafka's
// wire values, so a request's int8 converts directly.
type OpType int8

const (
	OpSet      OpType = 0
	OpDelete   OpType = 1
	OpAppend   OpType = 2 // list keys only: add values not already present
	OpSubtract OpType = 3 // list keys only: remove values
)

func (o OpType) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpDelete:
		return "DELETE"
	case OpAppend:
		return "APPEND"
	case OpSubtract:
		return "SUBTRACT"
	}
	return "UNKNOWN"
}

// ConfigOp is one IncrementalAlterConfigs change.
type ConfigOp struct {
	Key   string
	Op    OpType
	Value string // ignored for OpDelete
}
