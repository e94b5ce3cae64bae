package txn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"strconv"
)

// snapshot is the persisted form of ProducerState: a line with the CRC-32C
// (Castagnoli) of the JSON body in hex, then the body, so a damaged snapshot
// is refused instead of restoring wrong sequences. Version 1 (written by
// older releases at a clean shutdown) had no checksum line; version 2 had
// no transaction fields (every producer then had none open); version 3 adds
// them. The completed transactions waiting for the high watermark are not
// kept: a replay from the snapshot finds the markers it covers again, and
// one below the snapshot is below the high watermark of any replica that
// wrote the snapshot after it (Kafka's truncateAndReload clears them too).
type snapshot struct {
	Version   int                    `json:"version"`
	Offset    int64                  `json:"offset"` // log end offset the state is valid at
	Producers map[int64]snapProducer `json:"producers"`
}

type snapProducer struct {
	Epoch            int16       `json:"epoch"`
	Batches          []BatchInfo `json:"batches"`
	CoordinatorEpoch int32       `json:"coordinator_epoch"`
	TxnFirst         int64       `json:"txn_first_offset"`
	LastTimestamp    int64       `json:"last_timestamp"`
}

const snapshotVersion = 3

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot encodes the state as of log end offset `offset` (the state
// covers exactly the batches below it); LoadSnapshot restores it.
// Verifications in progress are not part of it.
func (s *ProducerState) Snapshot(offset int64) ([]byte, error) {
	snap := snapshot{Version: snapshotVersion, Offset: offset, Producers: make(map[int64]snapProducer, len(s.producers))}
	for id, p := range s.producers {
		if len(p.batches) == 0 && p.txnFirst < 0 && p.coordinatorEpoch < 0 && p.lastTimestamp < 0 {
			continue // only a verification made it known
		}
		snap.Producers[id] = snapProducer{Epoch: p.epoch, Batches: p.batches, CoordinatorEpoch: p.coordinatorEpoch,
			TxnFirst: p.txnFirst, LastTimestamp: p.lastTimestamp}
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
	checked := len(body) < len(b)
	switch {
	case snap.Version == 1 && !checked: // no checksum line, as version 1 wrote it
	case (snap.Version == 2 || snap.Version == snapshotVersion) && checked:
	default:
		return nil, 0, fmt.Errorf("producer state snapshot: unknown version %d", snap.Version)
	}
	s := NewProducerState()
	for id, sp := range snap.Producers {
		if len(sp.Batches) > MaxCachedBatches {
			sp.Batches = sp.Batches[len(sp.Batches)-MaxCachedBatches:]
		}
		p := &producer{epoch: sp.Epoch, batches: sp.Batches, coordinatorEpoch: sp.CoordinatorEpoch,
			txnFirst: sp.TxnFirst, lastTimestamp: sp.LastTimestamp}
		if snap.Version < 3 {
			// Written before transactions: none open, no marker seen; its
			// age is its last batch's.
			p.coordinatorEpoch, p.txnFirst, p.lastTimestamp = -1, -1, -1
			if n := len(sp.Batches); n > 0 {
				p.lastTimestamp = sp.Batches[n-1].Timestamp
			}
		}
		if p.txnFirst < -1 || p.coordinatorEpoch < -1 {
			return nil, 0, fmt.Errorf("producer state snapshot: producer %d has transaction offset %d, coordinator epoch %d",
				id, p.txnFirst, p.coordinatorEpoch)
		}
		s.producers[id] = p
	}
	return s, snap.Offset, nil
}
