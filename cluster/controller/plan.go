package controller

import (
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/moonmq/moonmq/cluster/metadata"
)

// The planners turn a request into the records of its change. They run on
// the proposer against its current state, and on replay of a version 1
// command against the state it applies to; they must be deterministic,
// depending only on their arguments and st (anything random, such as a
// topic id, is an argument). The FSM checks the records again when it
// applies them (applyRecords), so a change that raced another is still
// rejected the same way on every replica.

func planInitCluster(st *state, clusterID string) ([]record, error) {
	if st.clusterID != "" {
		return nil, nil // chosen at the first start; it stays
	}
	if clusterID == "" {
		return nil, fmt.Errorf("%w: empty cluster id", metadata.ErrInvalidRequest)
	}
	return []record{&clusterRecord{ClusterID: clusterID}}, nil
}

// planRegisterBroker registers b (unfenced). A fenced broker registering
// again (it restarted) is unfenced by it and leads again the offline
// partitions whose ISR holds it. A broker that restarted without being
// fenced is fenced first, by its own entry (see restarted).
func planRegisterBroker(st *state, b metadata.Broker, eligible func(int32) bool) ([]record, error) {
	b.Fenced = false
	if err := validateBroker(b); err != nil {
		return nil, err
	}
	cur, ok := st.brokers[b.ID]
	if ok && cur == b {
		return nil, nil
	}
	recs := []record{&registerBrokerRecord{BrokerID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Incarnation: b.Incarnation}}
	if ok && cur.Fenced {
		recs = append(recs, planOfflineLeaders(st, func(r int32) bool { return r == b.ID || eligible(r) })...)
	}
	return recs, nil
}

// restarted reports whether b's registration comes from a new process of
// a broker registered and unfenced now: its incarnation changed. Such a
// broker may have lost what it had not flushed (a topic with
// flush.policy=interval acknowledges before the fsync), yet it is still in
// ISRs and may still lead in its old epochs, where it would write other
// records at offsets its followers hold. The controller fences it first
// (its leaderships move with new epochs, it leaves the ISRs), and the
// registration then unfences it, as Kafka's controller handles a broker
// that registers with a new incarnation id.
func restarted(st *state, b metadata.Broker) bool {
	cur, ok := st.brokers[b.ID]
	return ok && !cur.Fenced && b.Incarnation != "" && cur.Incarnation != b.Incarnation
}

func validateBroker(b metadata.Broker) error {
	if b.ID < 0 || b.Port < 0 || b.Port > math.MaxUint16 {
		return fmt.Errorf("%w: broker %d at port %d", metadata.ErrInvalidRequest, b.ID, b.Port)
	}
	return nil
}

func planCreateTopic(st *state, name, topicID string, internal bool, parts []partitionAssignment, configs map[string]string) ([]record, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if _, ok := st.topics[name]; ok {
		return nil, fmt.Errorf("%w: %q", metadata.ErrTopicExists, name)
	}
	if err := st.checkCollision(name); err != nil {
		return nil, err
	}
	n := len(parts)
	if n < 1 || n > metadata.MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions; use 1 to %d", metadata.ErrInvalidPartitions, n, metadata.MaxPartitions)
	}
	if err := validatePartitions(parts, len(parts[0].Replicas)); err != nil {
		return nil, err
	}
	if _, err := parseTopicID(topicID); err != nil {
		return nil, err
	}
	if err := validateConfigs(configs); err != nil {
		return nil, err
	}
	return topicRecords(name, topicID, internal, parts, configs), nil
}

func parseTopicID(s string) ([16]byte, error) {
	id, err := uuid.Parse(s)
	if err != nil || id == (uuid.UUID{}) {
		return [16]byte{}, fmt.Errorf("%w: bad topic id %q", metadata.ErrInvalidRequest, s)
	}
	return id, nil
}

func planDeleteTopic(st *state, name string) ([]record, error) {
	t, ok := st.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	return []record{&removeTopicRecord{TopicID: topicIDString(t.ID)}}, nil
}

func planCreatePartitions(st *state, name string, total int32, parts []partitionAssignment) ([]record, error) {
	t, ok := st.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	cur := int32(len(t.Partitions))
	if total <= cur {
		return nil, fmt.Errorf("%w: topic %q has %d partitions; the new total must be greater", metadata.ErrInvalidPartitions, t.Name, cur)
	}
	if total > metadata.MaxPartitions {
		return nil, fmt.Errorf("%w: %d partitions; the limit is %d", metadata.ErrInvalidPartitions, total, metadata.MaxPartitions)
	}
	if int64(len(parts)) != int64(total-cur) {
		return nil, fmt.Errorf("%w: %d new partitions assigned for %d -> %d (concurrent change?)", metadata.ErrInvalidPartitions, len(parts), cur, total)
	}
	if err := validatePartitions(parts, len(t.Partitions[0].Replicas)); err != nil {
		return nil, err
	}
	return partitionRecords(topicIDString(t.ID), cur, parts), nil
}

func planAlterConfigs(st *state, name string, ops []metadata.ConfigOp) ([]record, error) {
	t, ok := st.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	next, err := applyConfigOps(t.Configs, ops)
	if err != nil {
		return nil, err
	}
	return configRecords(name, t.Configs, next), nil
}

func planReplaceConfigs(st *state, name string, configs map[string]string) ([]record, error) {
	t, ok := st.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	if err := validateConfigs(configs); err != nil {
		return nil, err
	}
	return configRecords(name, t.Configs, configs), nil
}

// planProducerIDs reserves count ids for broker (-1: not recorded, as
// version 1 commands did not say).
func planProducerIDs(st *state, broker int32, count int64) ([]record, error) {
	if count < 1 || count > MaxProducerIDBlock {
		return nil, fmt.Errorf("%w: producer id block of %d; use 1 to %d", metadata.ErrInvalidRequest, count, MaxProducerIDBlock)
	}
	if st.nextPID > math.MaxInt64-count {
		return nil, metadata.ErrProducerIDsExhausted
	}
	return []record{&producerIDsRecord{BrokerID: broker, NextProducerID: st.nextPID + count}}, nil
}
