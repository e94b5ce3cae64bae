package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// A Raft log entry written by this version is commandV2 followed by a JSON
// array of typed records, one per change, as KRaft's metadata log has them
// (TopicRecord, PartitionRecord, ConfigRecord, ...). The FSM applies an
// entry's records in order, all or none. Entries written by older versions
// (commandV1: one catch-all command) are converted to records against the
// state they apply to, so they replay to the same state.
const commandV2 = 2

// Record types. Stored in the Raft log forever: never rename one.
const (
	recTypeCluster         = "cluster"
	recTypeRegisterBroker  = "register_broker"
	recTypeTopic           = "topic"
	recTypePartition       = "partition"
	recTypePartitionChange = "partition_change"
	recTypeConfig          = "config"
	recTypeRemoveTopic     = "remove_topic"
	recTypeProducerIDs     = "producer_ids"
	recTypeFenceBroker     = "fence_broker"
	recTypeUnfenceBroker   = "unfence_broker"
)

// record is one typed change.
type record interface{ recordType() string }

// clusterRecord sets the cluster id; it changes nothing once one is set
// (the first start's choice stays).
type clusterRecord struct {
	ClusterID string `json:"cluster_id"`
}

// registerBrokerRecord registers a broker (KRaft RegisterBrokerRecord): the
// address clients reach it at and its rack. A later one for the same id
// replaces it.
type registerBrokerRecord struct {
	BrokerID    int32  `json:"broker_id"`
	Host        string `json:"host"`
	Port        int32  `json:"port"`
	Rack        string `json:"rack,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
}

// fenceBrokerRecord fences a registered broker (KRaft FenceBrokerRecord):
// the active controller found it unreachable for the session timeout, or
// it shut down. The PartitionChangeRecords that move its leaderships and
// take it out of ISRs are in the same entry.
type fenceBrokerRecord struct {
	BrokerID int32 `json:"broker_id"`
}

// unfenceBrokerRecord unfences a broker that is reachable again (KRaft
// UnfenceBrokerRecord). A registration unfences too.
type unfenceBrokerRecord struct {
	BrokerID int32 `json:"broker_id"`
}

// topicRecord creates a topic with no partitions; the PartitionRecords that
// follow it in the same entry add them (an entry may not leave a topic
// without partitions).
type topicRecord struct {
	Name     string `json:"name"`
	TopicID  string `json:"topic_id"`
	Internal bool   `json:"internal,omitempty"`
}

// partitionRecord adds partition Partition (the next id) to a topic.
type partitionRecord struct {
	TopicID     string  `json:"topic_id"`
	Partition   int32   `json:"partition"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
}

// partitionChangeRecord changes a partition's leadership or replicas
// (KRaft PartitionChangeRecord). A nil field is unchanged; Leader may be
// metadata.NoLeader (no ISR member is eligible: the partition is offline).
// A change of leader increments the leader epoch and every record the
// partition epoch, so every replica of the log derives the same epochs
// from the same records.
//
// Offline, when present, replaces the partition's offline replicas (the
// replicas whose broker reported their storage failed); an empty list
// (JSON []) clears them, and an absent one (nil, as in every record
// written before replicas could be reported offline) leaves them as they
// are. Its pointer tells the two apart: an empty slice is an ISR or
// replica list no record may set, but a valid offline set.
type partitionChangeRecord struct {
	TopicID   string   `json:"topic_id"`
	Partition int32    `json:"partition"`
	Leader    *int32   `json:"leader,omitempty"`
	ISR       []int32  `json:"isr,omitempty"`
	Replicas  []int32  `json:"replicas,omitempty"`
	Offline   *[]int32 `json:"offline,omitempty"`
}

// configResourceTopic is Kafka's ConfigResource type for a topic.
const configResourceTopic = 2

// configRecord sets (Value non-nil) or removes (nil) one config override
// (KRaft ConfigRecord). The resulting override set of a topic is validated
// as a whole at the end of the entry.
type configRecord struct {
	ResourceType int8    `json:"resource_type"`
	ResourceName string  `json:"resource_name"`
	Name         string  `json:"name"`
	Value        *string `json:"value,omitempty"`
}

// removeTopicRecord deletes a topic (KRaft RemoveTopicRecord).
type removeTopicRecord struct {
	TopicID string `json:"topic_id"`
}

// producerIDsRecord reserves the producer ids from the current counter up
// to NextProducerID (exclusive) for BrokerID (KRaft ProducerIdsRecord).
type producerIDsRecord struct {
	BrokerID       int32 `json:"broker_id"`
	NextProducerID int64 `json:"next_producer_id"`
}

func (*clusterRecord) recordType() string         { return recTypeCluster }
func (*registerBrokerRecord) recordType() string  { return recTypeRegisterBroker }
func (*topicRecord) recordType() string           { return recTypeTopic }
func (*partitionRecord) recordType() string       { return recTypePartition }
func (*partitionChangeRecord) recordType() string { return recTypePartitionChange }
func (*configRecord) recordType() string          { return recTypeConfig }
func (*removeTopicRecord) recordType() string     { return recTypeRemoveTopic }
func (*producerIDsRecord) recordType() string     { return recTypeProducerIDs }
func (*fenceBrokerRecord) recordType() string     { return recTypeFenceBroker }
func (*unfenceBrokerRecord) recordType() string   { return recTypeUnfenceBroker }

// newRecord returns an empty record of a type, or nil for an unknown one.
func newRecord(typ string) record {
	switch typ {
	case recTypeCluster:
		return &clusterRecord{}
	case recTypeRegisterBroker:
		return &registerBrokerRecord{}
	case recTypeTopic:
		return &topicRecord{}
	case recTypePartition:
		return &partitionRecord{}
	case recTypePartitionChange:
		return &partitionChangeRecord{}
	case recTypeConfig:
		return &configRecord{}
	case recTypeRemoveTopic:
		return &removeTopicRecord{}
	case recTypeProducerIDs:
		return &producerIDsRecord{}
	case recTypeFenceBroker:
		return &fenceBrokerRecord{}
	case recTypeUnfenceBroker:
		return &unfenceBrokerRecord{}
	}
	return newSecurityRecord(typ)
}

// maxRecordsPerEntry bounds an entry's records: a topic creation at the
// partition limit with every config key overridden, and then some.
const maxRecordsPerEntry = 2*metadata.MaxPartitions + 1024

type recordEnvelope struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func encodeRecords(recs []record) ([]byte, error) {
	env := make([]recordEnvelope, len(recs))
	for i, r := range recs {
		js, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode %s record: %w", r.recordType(), err)
		}
		env[i] = recordEnvelope{Type: r.recordType(), Data: js}
	}
	js, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode records: %w", err)
	}
	return append([]byte{commandV2}, js...), nil
}

func decodeRecords(b []byte) ([]record, error) {
	var env []recordEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("%w: decode records: %v", metadata.ErrInvalidRequest, err)
	}
	if len(env) > maxRecordsPerEntry {
		return nil, fmt.Errorf("%w: %d records in one entry; the limit is %d", metadata.ErrInvalidRequest, len(env), maxRecordsPerEntry)
	}
	out := make([]record, len(env))
	for i, e := range env {
		r := newRecord(e.Type)
		if r == nil {
			// From a newer version: the state machine stops (fsm.Apply).
			return nil, fmt.Errorf("unknown record type %q: %w", e.Type, errNewerEntry)
		}
		if err := json.Unmarshal(e.Data, r); err != nil {
			return nil, fmt.Errorf("%w: decode %s record: %v", metadata.ErrInvalidRequest, e.Type, err)
		}
		out[i] = r
	}
	return out, nil
}

// decodeEntry turns a log entry of either version into records. A v1
// command is planned against st, as v1 applied it.
func decodeEntry(b []byte, st *state) ([]record, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty command", metadata.ErrInvalidRequest)
	}
	switch b[0] {
	case commandV1:
		cmd, err := decodeCommandV1(b[1:])
		if err != nil {
			return nil, err
		}
		return recordsFromV1(cmd, st)
	case commandV2:
		return decodeRecords(b[1:])
	}
	return nil, fmt.Errorf("unknown entry version %d: %w", b[0], errNewerEntry)
}

// configRecords returns the records that turn cur into next, in key order.
func configRecords(topic string, cur, next map[string]string) []record {
	var keys []string
	for k, v := range next {
		if old, ok := cur[k]; !ok || old != v {
			keys = append(keys, k)
		}
	}
	for k := range cur {
		if _, ok := next[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]record, 0, len(keys))
	for _, k := range keys {
		r := &configRecord{ResourceType: configResourceTopic, ResourceName: topic, Name: k}
		if v, ok := next[k]; ok {
			r.Value = &v
		}
		out = append(out, r)
	}
	return out
}

// topicRecords are the records of a topic's creation: the topic, each
// partition, each config override.
func topicRecords(name, id string, internal bool, parts []partitionAssignment, configs map[string]string) []record {
	out := make([]record, 0, 1+len(parts)+len(configs))
	out = append(out, &topicRecord{Name: name, TopicID: id, Internal: internal})
	out = append(out, partitionRecords(id, 0, parts)...)
	return append(out, configRecords(name, nil, configs)...)
}

func partitionRecords(id string, first int32, parts []partitionAssignment) []record {
	out := make([]record, len(parts))
	for i, p := range parts {
		out[i] = &partitionRecord{
			TopicID: id, Partition: first + int32(i),
			Replicas: slices.Clone(p.Replicas), ISR: slices.Clone(p.ISR),
			Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		}
	}
	return out
}
