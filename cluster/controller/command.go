package controller

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// Raft log entries and stored records start with a version byte. Entries
// of version 1 are one JSON command each; this version writes version 2
// (records.go) and converts version 1 commands to records when it replays
// them, so logs written by older releases keep their meaning. The stored
// state (topics, the producer id counter, the cluster id) keeps version 1:
// JSON, where new fields are added as omitempty and old decoders ignore
// them.
const (
	commandV1 = 1
	recordV1  = 1
)

// Version 1 command operations, as older releases wrote them.
const (
	opInitCluster      = "init_cluster"
	opCreateTopic      = "create_topic"
	opDeleteTopic      = "delete_topic"
	opCreatePartitions = "create_partitions"
	opAlterConfigs     = "alter_configs"
	opReplaceConfigs   = "replace_configs"
	opAllocProducerIDs = "alloc_producer_ids"
)

// command is a version 1 Raft log entry: one catch-all struct per change.
// This version only reads it (decodeCommandV1).
type command struct {
	Op       string `json:"op"`
	Topic    string `json:"topic,omitempty"`
	TopicID  string `json:"topic_id,omitempty"`
	Internal bool   `json:"internal,omitempty"`
	// Partitions: create_topic: every partition; create_partitions: the new ones.
	Partitions []partitionAssignment `json:"partitions,omitempty"`
	Total      int32                 `json:"total,omitempty"`
	Configs    map[string]string     `json:"configs,omitempty"`
	ConfigOps  []configOpRecord      `json:"config_ops,omitempty"`
	Count      int64                 `json:"count,omitempty"`
	ClusterID  string                `json:"cluster_id,omitempty"`
}

// partitionAssignment is a partition's replicas and leadership, as a v1
// command carries it and as the stored state holds it.
type partitionAssignment struct {
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	// PartitionEpoch is absent in state written before partitions had one
	// (nothing had changed them: 0).
	PartitionEpoch int32 `json:"partition_epoch,omitempty"`
	// Offline (metadata.Partition.Offline) is absent when empty, and in
	// state written before replicas could be reported offline; v1
	// commands never carry it.
	Offline []int32 `json:"offline,omitempty"`
}

type configOpRecord struct {
	Key   string `json:"key"`
	Op    int8   `json:"op"`
	Value string `json:"value,omitempty"`
}

func decodeCommandV1(b []byte) (*command, error) {
	var c command
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%w: decode command: %v", metadata.ErrInvalidRequest, err)
	}
	return &c, nil
}

// recordsFromV1 plans a v1 command against st with the planners this
// version's proposers use, which check what v1's FSM checked: a command v1
// rejected is rejected, one it applied becomes the records of that change.
func recordsFromV1(cmd *command, st *state) ([]record, error) {
	switch cmd.Op {
	case opInitCluster:
		return planInitCluster(st, cmd.ClusterID)
	case opCreateTopic:
		return planCreateTopic(st, cmd.Topic, cmd.TopicID, cmd.Internal, cmd.Partitions, cmd.Configs)
	case opDeleteTopic:
		return planDeleteTopic(st, cmd.Topic)
	case opCreatePartitions:
		return planCreatePartitions(st, cmd.Topic, cmd.Total, cmd.Partitions)
	case opAlterConfigs:
		ops := make([]metadata.ConfigOp, len(cmd.ConfigOps))
		for i, o := range cmd.ConfigOps {
			ops[i] = metadata.ConfigOp{Key: o.Key, Op: metadata.OpType(o.Op), Value: o.Value}
		}
		return planAlterConfigs(st, cmd.Topic, ops)
	case opReplaceConfigs:
		return planReplaceConfigs(st, cmd.Topic, cmd.Configs)
	case opAllocProducerIDs:
		return planProducerIDs(st, -1, cmd.Count)
	}
	return nil, fmt.Errorf("%w: unknown command %q", metadata.ErrInvalidRequest, cmd.Op)
}

// storedTopic is how a topic is stored in the FSM state.
type storedTopic struct {
	Name       string                `json:"name"`
	ID         string                `json:"id"`
	Internal   bool                  `json:"internal,omitempty"`
	Partitions []partitionAssignment `json:"partitions"`
	Configs    map[string]string     `json:"configs,omitempty"`
}

func encodeTopic(t *metadata.Topic) ([]byte, error) {
	rec := storedTopic{
		Name:       t.Name,
		ID:         uuid.UUID(t.ID).String(),
		Internal:   t.Internal,
		Partitions: make([]partitionAssignment, len(t.Partitions)),
		Configs:    t.Configs,
	}
	for i, p := range t.Partitions {
		rec.Partitions[i] = partitionAssignment{Replicas: p.Replicas, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR,
			PartitionEpoch: p.PartitionEpoch, Offline: p.Offline}
	}
	js, err := json.Marshal(&rec)
	if err != nil {
		return nil, fmt.Errorf("encode topic %q: %w", t.Name, err)
	}
	return append([]byte{recordV1}, js...), nil
}

func decodeTopic(b []byte) (*metadata.Topic, error) {
	if len(b) == 0 || b[0] != recordV1 {
		return nil, fmt.Errorf("unknown topic record version")
	}
	var rec storedTopic
	if err := json.Unmarshal(b[1:], &rec); err != nil {
		return nil, fmt.Errorf("decode topic record: %w", err)
	}
	if len(rec.Partitions) == 0 {
		return nil, fmt.Errorf("topic %q has no partitions", rec.Name)
	}
	id, err := uuid.Parse(rec.ID)
	if err != nil {
		return nil, fmt.Errorf("topic %q: bad id %q: %w", rec.Name, rec.ID, err)
	}
	t := &metadata.Topic{
		Name:       rec.Name,
		ID:         id,
		Internal:   rec.Internal,
		Partitions: make([]metadata.Partition, len(rec.Partitions)),
		Configs:    rec.Configs,
	}
	for i, r := range rec.Partitions {
		t.Partitions[i] = metadata.Partition{ID: int32(i), Replicas: r.Replicas, Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, ISR: r.ISR,
			PartitionEpoch: r.PartitionEpoch, Offline: nonEmpty(r.Offline)}
	}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	return t, nil
}

// storedBroker is how a broker registration is stored in the FSM state.
type storedBroker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Fenced is absent in state written before brokers could be fenced:
	// they were all alive.
	Fenced      bool   `json:"fenced,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
}

func encodeBroker(b metadata.Broker) ([]byte, error) {
	js, err := json.Marshal(storedBroker(b))
	if err != nil {
		return nil, fmt.Errorf("encode broker %d: %w", b.ID, err)
	}
	return append([]byte{recordV1}, js...), nil
}

func decodeBroker(v []byte) (metadata.Broker, error) {
	if len(v) == 0 || v[0] != recordV1 {
		return metadata.Broker{}, fmt.Errorf("unknown broker record version")
	}
	var s storedBroker
	if err := json.Unmarshal(v[1:], &s); err != nil {
		return metadata.Broker{}, fmt.Errorf("decode broker record: %w", err)
	}
	return metadata.Broker(s), nil
}
