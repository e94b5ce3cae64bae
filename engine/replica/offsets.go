package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/moonmq/moonmq/engine/log"
)

// The offsets a reader is told and the reads it makes go through the
// partition, which owns them: the high watermark and the last stable offset
// are partition state (a replicated partition will set them from its
// followers, a transactional one hold the LSO back), not the log's.

// ErrInvalidListOffset is a ListOffsets timestamp that is neither a time
// nor one of the special values (Latest, Earliest, ...).
var ErrInvalidListOffset = errors.New("invalid ListOffsets timestamp")

// Special ListOffsets timestamps, as Kafka defines them.
const (
	ListLatest        int64 = -1 // the high watermark
	ListEarliest      int64 = -2 // the log start
	ListMaxTimestamp  int64 = -3 // the record with the largest timestamp
	ListEarliestLocal int64 = -4 // the local log start (no tiered storage: the log start)
)

// Position is where a partition stands for a reader.
type Position struct {
	LogStart      int64
	HighWatermark int64 // reads never go past it
	// LastStable is the last stable offset (read_committed readers stop
	// there). Without transactions it is the high watermark.
	LastStable int64
	// Changed is closed at the next append, truncation or deletion, for
	// long polls.
	Changed <-chan struct{}
}

// Position returns the partition's read bounds now.
func (p *Partition) Position() Position {
	changed := p.log.Changed() // before the offsets: a change after them closes it
	hw := p.log.HighWatermark()
	return Position{LogStart: p.log.LogStartOffset(), HighWatermark: hw, LastStable: hw, Changed: changed}
}

// HighWatermark is the offset below which records are readable.
func (p *Partition) HighWatermark() int64 { return p.log.HighWatermark() }

// Failure is why the partition's log is offline (an I/O error), or nil.
func (p *Partition) Failure() error { return p.log.Failure() }

// ReadAppend appends the stored batches from offset to dst, bounded by
// maxBytes as log.Log.ReadAppend bounds them, never past upTo (a bound
// from Position) nor the high watermark. An offset outside the log is
// log.ErrOffsetOutOfRange, with maxBytes 0 too (the answer a fetch with no
// room gives).
func (p *Partition) ReadAppend(dst []byte, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	return p.log.ReadAppend(dst, offset, maxBytes, min(upTo, p.log.HighWatermark()))
}

// ListOffset answers ListOffsets for one timestamp: an offset and, for a
// time or ListMaxTimestamp, the timestamp of the record found (-1
// otherwise). A time with no record at or after it below the high
// watermark answers -1, -1, as Kafka does.
func (p *Partition) ListOffset(timestamp int64) (offset, ts int64, err error) {
	switch timestamp {
	case ListLatest:
		return p.log.HighWatermark(), -1, nil
	case ListEarliest, ListEarliestLocal:
		return p.log.LogStartOffset(), -1, nil
	case ListMaxTimestamp:
		offset, ts = p.log.MaxTimestamp()
		return offset, ts, nil
	}
	if timestamp < 0 {
		return -1, -1, fmt.Errorf("%w: %d", ErrInvalidListOffset, timestamp)
	}
	off, found, ok, err := p.log.OffsetForTimestamp(timestamp)
	switch {
	case err != nil:
		return -1, -1, err
	case !ok || off >= p.log.HighWatermark():
		return -1, -1, nil
	}
	return off, found, nil
}

// DeleteRecords moves the log start to before (-1: the high watermark), as
// Kafka's DeleteRecords does, and returns the new log start. An offset
// below the log start changes nothing; one past the high watermark is
// log.ErrOffsetOutOfRange. Appends and deletion of the topic are excluded
// while it runs.
func (p *Partition) DeleteRecords(before int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return -1, fmt.Errorf("%w: %s-%d was deleted", ErrUnknownPartition, p.tp.Topic, p.tp.Partition)
	}
	hw := p.log.HighWatermark()
	if before == -1 {
		before = hw
	}
	if before < 0 || before > hw {
		return -1, fmt.Errorf("%w: delete records before %d, the high watermark is %d", log.ErrOffsetOutOfRange, before, hw)
	}
	return p.log.DeleteRecordsBefore(before)
}

// The group coordinator is the only writer of its internal partitions and
// waits for durability before it answers, so it reads them to the log end
// rather than the high watermark; these serve it.

// WaitOffsetDurable blocks until every record up to offset is on disk.
func (p *Partition) WaitOffsetDurable(ctx context.Context, offset int64) error {
	return p.log.WaitDurable(ctx, offset)
}

// ReadToEnd reads stored batches from offset up to the log end, bounded by
// maxBytes: for the partition's single writer, which has waited for what it
// wrote to be durable.
func (p *Partition) ReadToEnd(offset int64, maxBytes int) ([]byte, error) {
	return p.log.Read(offset, maxBytes, p.log.LogEndOffset())
}

// Bounds returns the log start and the log end.
func (p *Partition) Bounds() (start, end int64) {
	return p.log.LogStartOffset(), p.log.LogEndOffset()
}

// DamagedEnd returns the end of the damaged range holding offset, if it is
// in one (see log.Log.DamagedEnd).
func (p *Partition) DamagedEnd(offset int64) (int64, bool) { return p.log.DamagedEnd(offset) }

// Generation changes whenever the log was rewritten under its readers
// (truncated, healed, restarted empty), so they know to replay.
func (p *Partition) Generation() uint64 { return p.log.Generation() }
