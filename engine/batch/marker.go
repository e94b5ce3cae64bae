package batch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// End-transaction markers (KIP-98): the control batch a transaction
// coordinator has written to every partition of a transaction when it
// commits or aborts it. It is a RecordBatch v2 with the transactional and
// control attribute bits, the producer's id and epoch, and one record whose
// key is the control type and whose value carries the coordinator epoch:
//
//	key   int16 version (0) | int16 type (0 abort, 1 commit)
//	value int16 version (0) | int32 coordinator epoch
//
// as Kafka's ControlRecordType and EndTransactionMarker encode them.

// Control record types of an end-transaction marker.
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ErrNotMarker is returned by ParseEndTxnMarker for a control batch of
// another kind (Kafka's ControlRecordType UNKNOWN, or a leader-change
// record): not an error of the batch, only not a transaction's end.
var ErrNotMarker = errors.New("not an end-transaction marker")

// EndTxnMarker is what a marker says.
type EndTxnMarker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// BuildEndTxnMarker returns the control batch that ends producer pid's
// transaction at producer epoch epoch, as Kafka's
// MemoryRecords.withEndTransactionMarker writes it: offsets, leader epoch
// and CRC are set as Build sets them (the log assigns the base offset).
func BuildEndTxnMarker(pid int64, epoch int16, m EndTxnMarker, timestamp int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), uint16(typ))
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(m.CoordinatorEpoch))
	return Build(Header{
		Attributes:     TransactionalBit | ControlBit,
		FirstTimestamp: timestamp, MaxTimestamp: timestamp,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1,
	}, []Record{{Key: key, Value: value}})
}

// ParseEndTxnMarker reads the marker of control batch b (a whole, stored
// batch). A control batch whose record is of another control type is
// ErrNotMarker; one that is not a control batch, compressed, without
// exactly one record, or whose key or value is too short, is ErrCorrupt.
// Key and value versions above 0 are read as version 0, as Kafka reads them
// (later versions only append fields).
func ParseEndTxnMarker(b []byte) (EndTxnMarker, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return EndTxnMarker{}, err
	}
	if !h.IsControl() {
		return EndTxnMarker{}, fmt.Errorf("%w: batch at offset %d is not a control batch", ErrCorrupt, h.BaseOffset)
	}
	if h.NumRecords != 1 {
		return EndTxnMarker{}, fmt.Errorf("%w: control batch at offset %d has %d records, want 1", ErrCorrupt, h.BaseOffset, h.NumRecords)
	}
	var (
		rec   Record
		found bool
	)
	if err := Records(b, func(r Record) bool { rec, found = r, true; return false }); err != nil {
		return EndTxnMarker{}, fmt.Errorf("%w: control batch at offset %d: %v", ErrCorrupt, h.BaseOffset, err)
	}
	if !found || len(rec.Key) < 4 {
		return EndTxnMarker{}, fmt.Errorf("%w: control record at offset %d has a key of %d bytes, want at least 4", ErrCorrupt, h.BaseOffset, len(rec.Key))
	}
	if version := int16(binary.BigEndian.Uint16(rec.Key)); version < 0 {
		return EndTxnMarker{}, fmt.Errorf("%w: control record at offset %d has key version %d", ErrCorrupt, h.BaseOffset, version)
	}
	var m EndTxnMarker
	switch typ := int16(binary.BigEndian.Uint16(rec.Key[2:])); typ {
	case ControlAbort:
	case ControlCommit:
		m.Commit = true
	default:
		return EndTxnMarker{}, fmt.Errorf("%w: control record type %d at offset %d", ErrNotMarker, typ, h.BaseOffset)
	}
	if len(rec.Value) < 6 {
		return EndTxnMarker{}, fmt.Errorf("%w: end-transaction marker at offset %d has a value of %d bytes, want at least 6", ErrCorrupt, h.BaseOffset, len(rec.Value))
	}
	if version := int16(binary.BigEndian.Uint16(rec.Value)); version < 0 {
		return EndTxnMarker{}, fmt.Errorf("%w: end-transaction marker at offset %d has value version %d", ErrCorrupt, h.BaseOffset, version)
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(rec.Value[2:]))
	return m, nil
}
