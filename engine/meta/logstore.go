package meta

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// logEncodingV1 is the first byte of every stored raft.Log. A later format
// gets a new version byte; decodeLog rejects versions it does not know
// rather than misreading them.
const logEncodingV1 = 1

// LogStore implements raft.LogStore over the DB. Entries are keyed by
// big-endian index so pebble's ordering is index order, which makes
// FirstIndex and LastIndex a single seek each.
type LogStore struct{ db *DB }

var _ raft.LogStore = (*LogStore)(nil)

// LogStore returns the Raft log store backed by db.
func (db *DB) LogStore() raft.LogStore { return &LogStore{db: db} }

func logKey(index uint64) []byte {
	k := make([]byte, len(prefixLog)+8)
	copy(k, prefixLog)
	binary.BigEndian.PutUint64(k[len(prefixLog):], index)
	return k
}

// FirstIndex returns the lowest stored index, or 0 if the log is empty.
func (s *LogStore) FirstIndex() (uint64, error) { return s.edgeIndex(true) }

// LastIndex returns the highest stored index, or 0 if the log is empty.
func (s *LogStore) LastIndex() (uint64, error) { return s.edgeIndex(false) }

func (s *LogStore) edgeIndex(first bool) (uint64, error) {
	var idx uint64
	err := s.db.use(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: prefixLog, UpperBound: prefixEnd(prefixLog)})
		if err != nil {
			return err
		}
		var ok bool
		if first {
			ok = it.First()
		} else {
			ok = it.Last()
		}
		if ok {
			k := it.Key()
			if len(k) != len(prefixLog)+8 {
				_ = it.Close()
				return fmt.Errorf("%w: log key %q has wrong length", ErrCorrupt, k)
			}
			idx = binary.BigEndian.Uint64(k[len(prefixLog):])
		}
		return it.Close()
	})
	if err != nil {
		return 0, fmt.Errorf("meta: log edge index: %w", err)
	}
	return idx, nil
}

// GetLog reads the entry at index into out, or returns raft.ErrLogNotFound.
func (s *LogStore) GetLog(index uint64, out *raft.Log) error {
	v, err := s.db.get(logKey(index))
	if errors.Is(err, ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("meta: get log %d: %w", index, err)
	}
	if err := decodeLog(v, out); err != nil {
		return fmt.Errorf("meta: log %d: %w", index, err)
	}
	out.Index = index
	return nil
}

// StoreLog stores one entry durably.
func (s *LogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs stores entries in one synced batch: either all are durable when
// it returns nil, or none is visible.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	err := s.db.use(func(p *pebble.DB) error {
		b := p.NewBatch()
		defer b.Close()
		var buf []byte
		for _, l := range logs {
			buf = encodeLog(buf[:0], l)
			if err := b.Set(logKey(l.Index), buf, nil); err != nil {
				return err
			}
		}
		return b.Commit(pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("meta: store %d logs: %w", len(logs), err)
	}
	return nil
}

// DeleteRange deletes entries min..max inclusive. It is synced: Raft
// truncates conflicting suffixes before appending the leader's entries and
// must not see the old ones resurface after a crash.
func (s *LogStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	end := prefixEnd(prefixLog)
	if max != ^uint64(0) {
		end = logKey(max + 1)
	}
	err := s.db.use(func(p *pebble.DB) error {
		return p.DeleteRange(logKey(min), end, pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("meta: delete logs %d..%d: %w", min, max, err)
	}
	return nil
}

// encodeLog appends the v1 encoding of l (everything but Index, which is the
// key) to dst:
//
//	version u8 | term uvarint | type u8 | appendedAt unix-nanos varint (0 = zero time)
//	| len(data) uvarint | data | len(extensions) uvarint | extensions
func encodeLog(dst []byte, l *raft.Log) []byte {
	dst = append(dst, logEncodingV1)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	dst = binary.AppendVarint(dst, at)
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	return append(dst, l.Extensions...)
}

// decodeLog parses encodeLog's output into out (not out.Index). Every length
// is checked against the remaining bytes before slicing, so corrupt input
// yields ErrCorrupt, never a panic or a large allocation. Data and Extensions
// are copied: pebble owns the input buffer.
func decodeLog(b []byte, out *raft.Log) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty log entry", ErrCorrupt)
	}
	if b[0] != logEncodingV1 {
		return fmt.Errorf("%w: unknown log encoding version %d", ErrCorrupt, b[0])
	}
	b = b[1:]
	term, n := binary.Uvarint(b)
	if n <= 0 {
		return fmt.Errorf("%w: bad term", ErrCorrupt)
	}
	b = b[n:]
	if len(b) == 0 {
		return fmt.Errorf("%w: missing type", ErrCorrupt)
	}
	typ := raft.LogType(b[0])
	b = b[1:]
	at, n := binary.Varint(b)
	if n <= 0 {
		return fmt.Errorf("%w: bad appended-at", ErrCorrupt)
	}
	b = b[n:]
	data, b, err := readBytes(b, "data")
	if err != nil {
		return err
	}
	ext, b, err := readBytes(b, "extensions")
	if err != nil {
		return err
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(b))
	}
	out.Term = term
	out.Type = typ
	out.Data = data
	out.Extensions = ext
	out.AppendedAt = time.Time{}
	if at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	return nil
}

// readBytes reads a uvarint length and that many bytes (copied; nil if
// empty), bounding the length by what remains.
func readBytes(b []byte, what string) (val, rest []byte, err error) {
	ln, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, nil, fmt.Errorf("%w: bad %s length", ErrCorrupt, what)
	}
	b = b[n:]
	if ln > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: %s length %d exceeds remaining %d bytes", ErrCorrupt, what, ln, len(b))
	}
	if ln > 0 {
		val = append([]byte(nil), b[:ln]...)
	}
	return val, b[ln:], nil
}
