package txn

import (
	"cmp"
	"slices"
)

// CompletedTxn is a transaction a marker ended on this partition: from the
// producer's first transactional batch here to the marker.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the marker's offset
	Aborted     bool
}

// AbortedTxn is an entry of the partition's aborted-transaction index
// (Kafka's AbortedTxn): an aborted transaction's producer and offsets, and
// the last stable offset when its marker was written (the first offset of
// another producer's transaction still open then, or the offset after the
// marker), which bounds the index search of a read_committed fetch.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// StableView is what the last stable offset is computed from: the first
// offset of the earliest open transaction (-1: none) and the completed
// transactions whose marker may not be below the high watermark yet. It is
// a value: the partition publishes a new one after every change and reads
// it without the append lock.
type StableView struct {
	FirstOngoing int64
	Open         int            // transactions open on the partition
	Unreplicated []CompletedTxn // by marker offset
}

// Stable returns the current view.
func (s *ProducerState) Stable() StableView {
	v := StableView{FirstOngoing: -1, Unreplicated: slices.Clone(s.unreplicated)}
	for _, p := range s.producers {
		if p.txnFirst < 0 {
			continue
		}
		v.Open++
		if v.FirstOngoing < 0 || p.txnFirst < v.FirstOngoing {
			v.FirstOngoing = p.txnFirst
		}
	}
	return v
}

// OnHighWatermark forgets the completed transactions whose marker is below
// hw: replicated, they no longer hold the LSO back.
func (s *ProducerState) OnHighWatermark(hw int64) {
	s.unreplicated = slices.DeleteFunc(s.unreplicated, func(c CompletedTxn) bool { return c.LastOffset < hw })
}

// LastStable is the last stable offset for high watermark hw and log start
// logStart (Kafka's UnifiedLog.lastStableOffset): the first offset of the
// earliest transaction still open, or completed with its marker at or above
// hw, if it is below hw (never below the log start); else hw. A
// read_committed consumer reads below it.
func (v StableView) LastStable(hw, logStart int64) int64 {
	first := v.FirstOngoing
	for _, c := range v.Unreplicated {
		if c.LastOffset >= hw && (first < 0 || c.FirstOffset < first) {
			first = c.FirstOffset
		}
	}
	if first < 0 || first >= hw {
		return hw
	}
	return max(first, logStart)
}

// ProducerInfo describes one producer the partition knows (Kafka's
// DescribeProducers): its epoch, the last sequence and timestamp it wrote,
// the coordinator epoch of its last marker, and the first offset of its
// open transaction (-1: none).
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32 // -1: no batch known at this epoch
	LastTimestamp    int64
	CoordinatorEpoch int32
	TxnStartOffset   int64
}

// Producers lists the producers the partition knows, by id.
func (s *ProducerState) Producers() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(s.producers))
	for id, p := range s.producers {
		info := ProducerInfo{ProducerID: id, Epoch: p.epoch, LastSequence: -1, LastTimestamp: p.lastTimestamp,
			CoordinatorEpoch: p.coordinatorEpoch, TxnStartOffset: p.txnFirst}
		if n := len(p.batches); n > 0 {
			info.LastSequence = p.batches[n-1].LastSeq
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}
