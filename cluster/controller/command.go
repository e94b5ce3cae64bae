package controller

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// Commands and stored records are a version byte followed by JSON. JSON
// because metadata writes are rare and small and the format must stay
// readable by later versions: new fields are added as omitempty and old
// decoders ignore them. A new version byte is only for incompatible changes.
const (
	commandV1 = 1
	recordV1  = 1
)

// Command operations. Stored in the Raft log forever: never rename one.
const (
	opInitCluster      = "init_cluster"
	opCreateTopic      = "create_topic"
	opDeleteTopic      = "delete_topic"
	opCreatePartitions = "create_partitions"
	opAlterConfigs     = "alter_configs"
	opReplaceConfigs   = "replace_configs"
	opAllocProducerIDs = "alloc_producer_ids"
)

// command is one Raft log entry. Everything non-deterministic (topic IDs,
// the cluster id, replica placement) is decided by the proposer and carried
// here, so applying a command depends only on the command and the state.
type command struct {
	Op       string `json:"op"`
	Topic    string `json:"topic,omitempty"`
	TopicID  string `json:"topic_id,omitempty"`
	Internal bool   `json:"internal,omitempty"`
	// Partitions: create_topic: every partition; create_partitions: the new ones.
	Partitions []partitionRecord `json:"partitions,omitempty"`
	Total      int32             `json:"total,omitempty"`
	Configs    map[string]string `json:"configs,omitempty"`
	ConfigOps  []configOpRecord  `json:"config_ops,omitempty"`
	Count      int64             `json:"count,omitempty"`
	ClusterID  string            `json:"cluster_id,omitempty"`
}

type partitionRecord struct {
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
}

type configOpRecord struct {
	Key   string `json:"key"`
	Op    int8   `json:"op"`
	Value string `json:"value,omitempty"`
}

// topicRecord is how a topic is stored in the FSM state.
type topicRecord struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Internal   bool              `json:"internal,omitempty"`
	Partitions []partitionRecord `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

func encodeCommand(c *command) ([]byte, error) {
	js, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s command: %w", c.Op, err)
	}
	return append([]byte{commandV1}, js...), nil
}

func decodeCommand(b []byte) (*command, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty command", ErrInvalidRequest)
	}
	if b[0] != commandV1 {
		return nil, fmt.Errorf("%w: unknown command version %d (written by a newer MoonMQ?)", ErrInvalidRequest, b[0])
	}
	var c command
	if err := json.Unmarshal(b[1:], &c); err != nil {
		return nil, fmt.Errorf("%w: decode command: %v", ErrInvalidRequest, err)
	}
	return &c, nil
}

func partitionsToRecords(ps []Partition) []partitionRecord {
	out := make([]partitionRecord, len(ps))
	for i, p := range ps {
		out[i] = partitionRecord{Replicas: p.Replicas, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ISR: p.ISR}
	}
	return out
}

func recordsToPartitions(first int32, rs []partitionRecord) []Partition {
	out := make([]Partition, len(rs))
	for i, r := range rs {
		out[i] = Partition{
			ID:          first + int32(i),
			Replicas:    append([]int32(nil), r.Replicas...),
			Leader:      r.Leader,
			LeaderEpoch: r.LeaderEpoch,
			ISR:         append([]int32(nil), r.ISR...),
		}
	}
	return out
}

func encodeTopic(t *Topic) ([]byte, error) {
	rec := topicRecord{
		Name:       t.Name,
		ID:         uuid.UUID(t.ID).String(),
		Internal:   t.Internal,
		Partitions: partitionsToRecords(t.Partitions),
		Configs:    t.Configs,
	}
	js, err := json.Marshal(&rec)
	if err != nil {
		return nil, fmt.Errorf("encode topic %q: %w", t.Name, err)
	}
	return append([]byte{recordV1}, js...), nil
}

func decodeTopic(b []byte) (*Topic, error) {
	if len(b) == 0 || b[0] != recordV1 {
		return nil, fmt.Errorf("unknown topic record version")
	}
	var rec topicRecord
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
	t := &Topic{
		Name:       rec.Name,
		ID:         id,
		Internal:   rec.Internal,
		Partitions: recordsToPartitions(0, rec.Partitions),
		Configs:    rec.Configs,
	}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	return t, nil
}
