package controller

import (
	"errors"
	"maps"
	"slices"

	"github.com/moonmq/moonmq/engine/topicconfig"
)

// Sentinel errors. net/kafka maps them to Kafka error codes.
var (
	ErrTopicExists              = errors.New("topic already exists")                   // TOPIC_ALREADY_EXISTS
	ErrUnknownTopic             = errors.New("unknown topic")                          // UNKNOWN_TOPIC_OR_PARTITION
	ErrInvalidPartitions        = errors.New("invalid number of partitions")           // INVALID_PARTITIONS
	ErrInvalidReplicationFactor = errors.New("invalid replication factor")             // INVALID_REPLICATION_FACTOR
	ErrInvalidTopicName         = errors.New("invalid topic name")                     // INVALID_TOPIC_EXCEPTION
	ErrNotController            = errors.New("this node is not the active controller") // NOT_CONTROLLER
	ErrInvalidRequest           = errors.New("invalid request")                        // INVALID_REQUEST
	ErrProducerIDsExhausted     = errors.New("producer id space exhausted")            // UNKNOWN_SERVER_ERROR
	ErrClosed                   = errors.New("controller closed")
	ErrNodeIDMismatch           = errors.New("node id does not match the metadata directory")
	// ErrStateBroken is returned once a write to the metadata DB has failed
	// in the FSM; the in-memory state can no longer be trusted to match the
	// log, so the controller refuses further changes until restarted (which
	// replays the log from the last persisted index).
	ErrStateBroken = errors.New("controller state machine stopped after a storage failure")
)

// ErrInvalidConfig is returned for a bad topic config. It wraps
// topicconfig.ErrInvalid, so errors.Is matches either.
var ErrInvalidConfig = &configError{msg: "invalid topic config"}

// configError makes config failures match both ErrInvalidConfig and
// topicconfig.ErrInvalid while keeping topicconfig's message (which already
// says what was wrong) without repeating the prefix.
type configError struct {
	msg string
	err error // wraps topicconfig.ErrInvalid; nil for the sentinel itself
}

func (e *configError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.msg
}

func (e *configError) Is(target error) bool {
	return target == ErrInvalidConfig || target == topicconfig.ErrInvalid
}

func (e *configError) Unwrap() error { return e.err }

func invalidConfig(err error) error { return &configError{err: err} }

// Topic is the replicated description of a topic. Values returned by the
// Controller are copies: callers may keep and modify them freely.
type Topic struct {
	Name string
	// ID is a random UUID chosen by the proposer and carried in the command,
	// so every replica of the FSM stores the same one.
	ID         [16]byte
	Partitions []Partition // index == partition id
	Configs    map[string]string
	Internal   bool // __consumer_offsets, __transaction_state
}

// Partition is one partition's replica assignment and leadership.
type Partition struct {
	ID          int32
	Replicas    []int32
	Leader      int32
	LeaderEpoch int32
	ISR         []int32
}

// Clone returns a deep copy of t.
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

// EventKind says what changed.
type EventKind int

const (
	TopicCreated EventKind = iota + 1
	TopicDeleted
	PartitionsAdded
	ConfigsChanged
)

func (k EventKind) String() string {
	switch k {
	case TopicCreated:
		return "TopicCreated"
	case TopicDeleted:
		return "TopicDeleted"
	case PartitionsAdded:
		return "PartitionsAdded"
	case ConfigsChanged:
		return "ConfigsChanged"
	}
	return "Unknown"
}

// Event is delivered to OnChange listeners.
type Event struct {
	Kind EventKind
	// Topic is the topic after the change (for TopicDeleted: as it was).
	Topic Topic
	// Prev is the topic before the change; zero for TopicCreated. For
	// PartitionsAdded the new partitions are Topic.Partitions[len(Prev.Partitions):].
	Prev Topic
}
