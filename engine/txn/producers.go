// Package txn owns idempotent-producer state: per partition, the last
// sequence numbers each producer id wrote, used to drop retried duplicates
// and reject gaps, and producer-epoch fencing. (Transactions, the LSO and the
// aborted-transaction index are added here by the transactions issue.)
//
// Invariants: a ProducerState is touched only under its partition's append
// lock, so Check and Record see the log in the order it was written; Check
// never mutates state, Record is called only after the append succeeded.
package txn

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// Errors returned by Check, mapped by net/kafka to the Kafka codes of the
// same names.
var (
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	ErrInvalidEpoch       = errors.New("producer epoch is stale (fenced by a newer producer)")
	ErrInvalidSequence    = errors.New("invalid sequence number")
)

// MaxCachedBatches is how many recent batches per producer are remembered for
// duplicate detection: Kafka clients keep at most 5 requests in flight per
// connection when idempotence is on, so a retry is always among the last 5.
const MaxCachedBatches = 5

// BatchInfo is what the log knows about an appended producer batch.
type BatchInfo struct {
	FirstSeq, LastSeq      int32
	BaseOffset, LastOffset int64
	Timestamp              int64 // MaxTimestamp as stored, returned again for duplicates
}

type producer struct {
	epoch   int16
	batches []BatchInfo // oldest first, at most MaxCachedBatches
}

// ProducerState tracks the producers that wrote to one partition.
type ProducerState struct {
	producers map[int64]*producer
}

// NewProducerState returns empty state.
func NewProducerState() *ProducerState {
	return &ProducerState{producers: make(map[int64]*producer)}
}

// Len is the number of producers tracked.
func (s *ProducerState) Len() int { return len(s.producers) }

// Check decides whether a batch from (pid, epoch) with sequences
// [firstSeq, firstSeq+count-1] may be appended. It returns the earlier
// append's info when the batch is a retry of one of the last
// MaxCachedBatches batches (the caller answers success with those offsets and
// appends nothing), or an error when it must be rejected.
func (s *ProducerState) Check(pid int64, epoch int16, firstSeq, count int32) (dup *BatchInfo, err error) {
	if pid < 0 {
		return nil, nil // not an idempotent batch
	}
	if firstSeq < 0 {
		return nil, fmt.Errorf("%w: producer %d sent base sequence %d", ErrInvalidSequence, pid, firstSeq)
	}
	p, ok := s.producers[pid]
	if !ok {
		// Unknown producer (new, or its state aged out): accept any sequence,
		// as Kafka does since KIP-360.
		return nil, nil
	}
	if epoch < p.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d < current %d", ErrInvalidEpoch, pid, epoch, p.epoch)
	}
	if epoch > p.epoch {
		// A bumped epoch restarts sequences at 0.
		if firstSeq != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d",
				ErrOutOfOrderSequence, pid, epoch, firstSeq)
		}
		return nil, nil
	}
	lastSeq := addSeq(firstSeq, count-1)
	for i := range p.batches {
		b := p.batches[i]
		if b.FirstSeq == firstSeq && b.LastSeq == lastSeq {
			return &b, nil
		}
	}
	if len(p.batches) == 0 {
		return nil, nil
	}
	if want := addSeq(p.batches[len(p.batches)-1].LastSeq, 1); firstSeq != want {
		return nil, fmt.Errorf("%w: producer %d epoch %d expected sequence %d, got %d",
			ErrOutOfOrderSequence, pid, epoch, want, firstSeq)
	}
	return nil, nil
}

// Record notes a successfully appended batch.
func (s *ProducerState) Record(pid int64, epoch int16, info BatchInfo) {
	if pid < 0 {
		return
	}
	p, ok := s.producers[pid]
	if !ok {
		p = &producer{epoch: epoch}
		s.producers[pid] = p
	}
	if epoch > p.epoch {
		p.epoch = epoch
		p.batches = p.batches[:0]
	}
	if len(p.batches) == MaxCachedBatches {
		copy(p.batches, p.batches[1:])
		p.batches = p.batches[:MaxCachedBatches-1]
	}
	p.batches = append(p.batches, info)
}

// addSeq adds to a sequence number, wrapping at int32 max as Kafka does.
func addSeq(seq, n int32) int32 {
	if seq > int32(^uint32(0)>>1)-n {
		return n - (int32(^uint32(0)>>1) - seq) - 1
	}
	return seq + n
}

// LastSeq returns the last sequence of a batch of count records starting at firstSeq.
func LastSeq(firstSeq, count int32) int32 { return addSeq(firstSeq, count-1) }

// snapshot is the persisted form of ProducerState: a line with the CRC-32C
// (Castagnoli) of the JSON body in hex, then the body, so a damaged snapshot
// is refused instead of restoring wrong sequences. Version 1 (written by
// older releases at a clean shutdown) had no checksum line.
type snapshot struct {
	Version   int                    `json:"version"`
	Offset    int64                  `json:"offset"` // log end offset the state is valid at
	Producers map[int64]snapProducer `json:"producers"`
}

type snapProducer struct {
	Epoch   int16       `json:"epoch"`
	Batches []BatchInfo `json:"batches"`
}

const snapshotVersion = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the state as of log end offset `offset` (the state
// covers exactly the batches below it); LoadSnapshot restores it.
func (s *ProducerState) Snapshot(offset int64) ([]byte, error) {
	snap := snapshot{Version: snapshotVersion, Offset: offset, Producers: make(map[int64]snapProducer, len(s.producers))}
	for id, p := range s.producers {
		snap.Producers[id] = snapProducer{Epoch: p.epoch, Batches: p.batches}
	}
	body, err := json.Marshal(snap)
	if err != nil {
		return nil, err
	}
	out := fmt.Appendf(nil, "%08x\n", crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

// LoadSnapshot decodes a snapshot and returns the state and the offset it
// is valid at. Garbage is an error, never a panic.
func LoadSnapshot(b []byte) (*ProducerState, int64, error) {
	body := b
	if line, rest, ok := bytes.Cut(b, []byte("\n")); ok && len(line) == 8 {
		want, err := strconv.ParseUint(string(line), 16, 32)
		if err != nil {
			return nil, 0, fmt.Errorf("producer state snapshot: bad checksum line %q", line)
		}
		if got := crc32.Checksum(rest, castagnoli); uint32(want) != got {
			return nil, 0, fmt.Errorf("producer state snapshot: checksum %08x, want %08x", got, want)
		}
		body = rest
	}
	var snap snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return nil, 0, fmt.Errorf("producer state snapshot: %w", err)
	}
	switch {
	case snap.Version == 1 && len(body) == len(b): // no checksum line, as version 1 wrote it
	case snap.Version == snapshotVersion && len(body) < len(b):
	default:
		return nil, 0, fmt.Errorf("producer state snapshot: unknown version %d", snap.Version)
	}
	s := NewProducerState()
	for id, p := range snap.Producers {
		if len(p.Batches) > MaxCachedBatches {
			p.Batches = p.Batches[len(p.Batches)-MaxCachedBatches:]
		}
		s.producers[id] = &producer{epoch: p.Epoch, batches: p.Batches}
	}
	return s, snap.Offset, nil
}

// Expire forgets producers whose newest batch is older than maxAge (Kafka's
// producer.id.expiration.ms), so short-lived producers do not accumulate
// forever. It returns how many were removed.
func (s *ProducerState) Expire(nowMillis int64, maxAge int64) int {
	n := 0
	for id, p := range s.producers {
		if len(p.batches) == 0 || nowMillis-p.batches[len(p.batches)-1].Timestamp >= maxAge {
			delete(s.producers, id)
			n++
		}
	}
	return n
}
