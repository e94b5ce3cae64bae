package txncoord

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Records of __transaction_state, as Kafka writes them (TransactionLogKey
// version 0; TransactionLogValue version 0, or 1 — flexible, with the
// previous and next producer ids and the client's transaction version as
// tagged fields — from transaction version 1 on), so Kafka's
// TransactionLogMessageFormatter and kafka-dump-log read them. A null value
// (tombstone) removes the transactional id.

// encodeKey is the record key of transactional id id.
func encodeKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.TransactionalID = id
	return k.AppendTo(nil)
}

// encodeValue is the record value of m, at value version 1 when the
// cluster's transaction version is at least 1, else 0.
func encodeValue(m Metadata, clusterTV int16) []byte {
	v := kmsg.NewTxnMetadataValue()
	if clusterTV >= 1 {
		v.Version = 1
	}
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = m.ProducerID, m.Epoch, m.TimeoutMs
	v.State = kmsg.TransactionState(m.State)
	v.LastUpdateTimestamp, v.StartTimestamp = m.LastUpdateMs, m.StartMs
	switch m.State {
	case StateEmpty:
		v.Topics = nil // Kafka writes null for Empty
	default:
		v.Topics = []kmsg.TxnMetadataValueTopic{} // never null otherwise
		for _, tp := range m.SortedPartitions() {
			if n := len(v.Topics); n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
			}
			t := &v.Topics[len(v.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
	}
	v.PreviousProducerID, v.NextProducerID, v.ClientTransactionVersion = m.PrevProducerID, m.NextProducerID, m.ClientTV
	return v.AppendTo(nil)
}

// decoded is one record of the log.
type decoded struct {
	id      string
	deleted bool // a tombstone
	m       Metadata
}

// decodeRecord reads a record of the log; known is false for a key version
// this release does not know (skipped, as Kafka skips them). Garbage is an
// error, never a panic.
func decodeRecord(key, value []byte) (d decoded, known bool, err error) {
	defer func() {
		if r := recover(); r != nil { // kmsg on hostile bytes
			err = fmt.Errorf("undecodable transaction log record: %v", r)
		}
	}()
	if len(key) < 2 {
		return d, false, fmt.Errorf("transaction log key of %d bytes", len(key))
	}
	k := kmsg.NewTxnMetadataKey()
	if err := k.ReadFrom(key); err != nil {
		return d, false, fmt.Errorf("transaction log key: %w", err)
	}
	if k.Version != 0 {
		return d, false, nil
	}
	d.id = k.TransactionalID
	if value == nil {
		d.deleted = true
		return d, true, nil
	}
	v := kmsg.NewTxnMetadataValue()
	if err := v.ReadFrom(value); err != nil {
		return d, false, fmt.Errorf("transaction log value of %q: %w", d.id, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return d, false, fmt.Errorf("transaction log value of %q: version %d", d.id, v.Version)
	}
	st := State(v.State)
	if st < StateEmpty || st > StateCompleteAbort {
		return d, false, fmt.Errorf("transaction log value of %q: state %d", d.id, v.State)
	}
	m := Metadata{ID: d.id, ProducerID: v.ProducerID, PrevProducerID: v.PreviousProducerID, NextProducerID: v.NextProducerID,
		Epoch: v.ProducerEpoch, LastEpoch: noEpoch, TimeoutMs: v.TimeoutMillis, State: st,
		Partitions: map[TP]struct{}{}, StartMs: v.StartTimestamp, LastUpdateMs: v.LastUpdateTimestamp,
		ClientTV: v.ClientTransactionVersion}
	if v.Version == 0 {
		m.PrevProducerID, m.NextProducerID, m.ClientTV = noProducerID, noProducerID, 0
	}
	if st != StateEmpty { // Kafka ignores the partitions of an Empty value
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.Partitions[TP{Topic: t.Topic, Partition: p}] = struct{}{}
			}
		}
	}
	d.m = m
	return d, true, nil
}
