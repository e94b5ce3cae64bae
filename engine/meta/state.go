package meta

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// State stream format (StateSnapshot.WriteTo, RestoreState):
//
//	magic "MMQSTATE" | version u8
//	repeated: tagRecord u8 | len(key) uvarint | key | len(value) uvarint | value
//	tagEnd u8 | record count uvarint | crc32c (big-endian u32) of every byte before tagEnd
//
// Keys are relative to the fsm/ prefix ("applied", "k/..."), so a stream is
// independent of where a DB keeps its state.
const (
	stateMagic     = "MMQSTATE"
	stateVersionV1 = 1
	tagEnd         = 0
	tagRecord      = 1

	// MaxStateKey and MaxStateValue bound what RestoreState will allocate for
	// one record; the controller's keys and values are far smaller.
	MaxStateKey   = 64 << 10
	MaxStateValue = 64 << 20

	// stateChunk is how many bytes WriteTo gathers under the DB lock before
	// writing them out without it.
	stateChunk = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AppliedIndex returns the last Raft index whose effects are in the FSM
// state, or 0 for a fresh DB.
func (db *DB) AppliedIndex() (uint64, error) {
	v, err := db.get(keyApplied)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("meta: applied index: %w", err)
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: applied index holds %d bytes, want 8", ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func stateKey(k []byte) []byte { return concat(prefixFSMData, k) }

// GetState returns a copy of the FSM state value at key, or ErrNotFound.
func (db *DB) GetState(key []byte) ([]byte, error) {
	v, err := db.get(stateKey(key))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("meta: get state %q: %w", key, err)
	}
	return v, err
}

// ScanState calls fn for every FSM state key with the given prefix, in key
// order. key (without the prefix passed here) and value are only valid during
// the call. An error from fn stops the scan and is returned.
func (db *DB) ScanState(prefix []byte, fn func(key, value []byte) error) error {
	lo := stateKey(prefix)
	err := db.use(func(p *pebble.DB) error {
		it, err := p.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				_ = it.Close()
				return err
			}
			if err := fn(it.Key()[len(lo):], v); err != nil {
				_ = it.Close()
				return err
			}
		}
		return it.Close()
	})
	if err != nil {
		return fmt.Errorf("meta: scan state %q: %w", prefix, err)
	}
	return nil
}

// StateBatch collects FSM state changes to commit atomically with the
// applied index. It is not safe for concurrent use; the FSM goroutine owns it.
type StateBatch struct {
	db  *DB
	ops []stateOp
}

type stateOp struct {
	key, value []byte
	del        bool
}

// NewStateBatch returns an empty batch.
func (db *DB) NewStateBatch() *StateBatch { return &StateBatch{db: db} }

// Set records key=value. The slices are copied.
func (b *StateBatch) Set(key, value []byte) {
	b.ops = append(b.ops, stateOp{key: stateKey(key), value: append([]byte(nil), value...)})
}

// Delete records the removal of key.
func (b *StateBatch) Delete(key []byte) {
	b.ops = append(b.ops, stateOp{key: stateKey(key), del: true})
}

// Commit writes the recorded changes and applied as the new applied index,
// atomically, without fsync (see the package comment for why that is safe).
// The batch may be reused afterwards; it is empty again.
func (b *StateBatch) Commit(applied uint64) error {
	err := b.db.use(func(p *pebble.DB) error {
		pb := p.NewBatch()
		defer pb.Close()
		for _, op := range b.ops {
			var err error
			if op.del {
				err = pb.Delete(op.key, nil)
			} else {
				err = pb.Set(op.key, op.value, nil)
			}
			if err != nil {
				return err
			}
		}
		if err := pb.Set(keyApplied, binary.BigEndian.AppendUint64(nil, applied), nil); err != nil {
			return err
		}
		return pb.Commit(pebble.NoSync)
	})
	b.ops = b.ops[:0]
	if err != nil {
		return fmt.Errorf("meta: commit state at index %d: %w", applied, err)
	}
	return nil
}

// StateSnapshot is a point-in-time, durable view of the FSM state, used for
// Raft snapshots. Release it with Close.
type StateSnapshot struct {
	db      *DB
	snap    *pebble.Snapshot
	applied uint64
}

// SnapshotState fsyncs the WAL, so the state it captures is durable before a
// Raft snapshot can claim it (Raft compacts its log behind a snapshot), and
// returns a consistent view of it.
func (db *DB) SnapshotState() (*StateSnapshot, error) {
	if err := db.syncWAL(); err != nil {
		return nil, fmt.Errorf("meta: snapshot state: %w", err)
	}
	s, err := db.newSnapshot()
	if err != nil {
		return nil, fmt.Errorf("meta: snapshot state: %w", err)
	}
	ss := &StateSnapshot{db: db, snap: s}
	err = db.useSnap(s, func(s *pebble.Snapshot) error {
		v, closer, err := s.Get(keyApplied)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer closer.Close()
		if len(v) != 8 {
			return fmt.Errorf("%w: applied index holds %d bytes", ErrCorrupt, len(v))
		}
		ss.applied = binary.BigEndian.Uint64(v)
		return nil
	})
	if err != nil {
		_ = ss.Close()
		return nil, fmt.Errorf("meta: snapshot state: %w", err)
	}
	return ss, nil
}

// syncWAL makes every earlier write durable: a synced write of a log-only
// record syncs the shared WAL up to and including it.
func (db *DB) syncWAL() error {
	return db.use(func(p *pebble.DB) error {
		return p.LogData([]byte("sync"), pebble.Sync)
	})
}

// useSnap runs fn with s readable, or returns ErrClosed if the DB (and so s)
// has been closed.
func (db *DB) useSnap(s *pebble.Snapshot, fn func(*pebble.Snapshot) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	if _, ok := db.snaps[s]; !ok {
		return ErrClosed
	}
	return fn(s)
}

// AppliedIndex returns the applied index captured by the snapshot.
func (s *StateSnapshot) AppliedIndex() uint64 { return s.applied }

// WriteTo streams the snapshot in the state stream format. It does not hold
// the DB lock while writing to w, so w may itself write to the DB (the
// snapshot store does).
func (s *StateSnapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w, crc: crc32.New(crcTable)}
	hdr := append([]byte(stateMagic), stateVersionV1)
	if _, err := cw.Write(hdr); err != nil {
		return cw.n, fmt.Errorf("meta: write state: %w", err)
	}
	var (
		count uint64
		next  = prefixFSM // resume point
		buf   []byte
	)
	upper := prefixEnd(prefixFSM)
	for next != nil {
		buf = buf[:0]
		err := s.db.useSnap(s.snap, func(ps *pebble.Snapshot) error {
			it, err := ps.NewIter(&pebble.IterOptions{LowerBound: next, UpperBound: upper})
			if err != nil {
				return err
			}
			next = nil
			for ok := it.First(); ok; ok = it.Next() {
				if len(buf) >= stateChunk {
					next = append([]byte(nil), it.Key()...)
					break
				}
				v, err := it.ValueAndErr()
				if err != nil {
					_ = it.Close()
					return err
				}
				k := it.Key()[len(prefixFSM):]
				buf = append(buf, tagRecord)
				buf = binary.AppendUvarint(buf, uint64(len(k)))
				buf = append(buf, k...)
				buf = binary.AppendUvarint(buf, uint64(len(v)))
				buf = append(buf, v...)
				count++
			}
			return it.Close()
		})
		if err != nil {
			return cw.n, fmt.Errorf("meta: read state snapshot: %w", err)
		}
		if _, err := cw.Write(buf); err != nil {
			return cw.n, fmt.Errorf("meta: write state: %w", err)
		}
	}
	sum := cw.crc.Sum32()
	tail := binary.AppendUvarint([]byte{tagEnd}, count)
	tail = binary.BigEndian.AppendUint32(tail, sum)
	if _, err := cw.Write(tail); err != nil {
		return cw.n, fmt.Errorf("meta: write state: %w", err)
	}
	return cw.n, nil
}

// Close releases the snapshot. It is idempotent.
func (s *StateSnapshot) Close() error {
	if s.snap == nil {
		return nil
	}
	err := s.db.releaseSnapshot(s.snap)
	s.snap = nil
	return err
}

// RestoreState replaces the whole FSM state (including the applied index)
// with a stream written by StateSnapshot.WriteTo, atomically and durably.
// A truncated, corrupt or oversized stream returns ErrCorrupt and leaves the
// existing state untouched.
func (db *DB) RestoreState(r io.Reader) error {
	cr := &crcReader{r: bufio.NewReader(r), crc: crc32.New(crcTable)}
	hdr := make([]byte, len(stateMagic)+1)
	if _, err := io.ReadFull(cr, hdr); err != nil {
		return fmt.Errorf("%w: state stream header: %v", ErrCorrupt, err)
	}
	if string(hdr[:len(stateMagic)]) != stateMagic {
		return fmt.Errorf("%w: state stream has bad magic", ErrCorrupt)
	}
	if hdr[len(stateMagic)] != stateVersionV1 {
		return fmt.Errorf("%w: unknown state stream version %d", ErrCorrupt, hdr[len(stateMagic)])
	}
	var recs []stateKV
	for {
		tag, err := cr.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: state stream truncated: %v", ErrCorrupt, err)
		}
		if tag == tagEnd {
			break
		}
		if tag != tagRecord {
			return fmt.Errorf("%w: state stream has unknown tag %d", ErrCorrupt, tag)
		}
		k, err := readBounded(cr, MaxStateKey, "key")
		if err != nil {
			return err
		}
		v, err := readBounded(cr, MaxStateValue, "value")
		if err != nil {
			return err
		}
		if len(k) == 0 {
			return fmt.Errorf("%w: state stream has an empty key", ErrCorrupt)
		}
		if bytes.Equal(concat(prefixFSM, k), keyApplied) && len(v) != 8 {
			return fmt.Errorf("%w: applied index holds %d bytes", ErrCorrupt, len(v))
		}
		recs = append(recs, stateKV{k, v})
	}
	// The trailer's CRC covers every byte before the end tag; crcReader has
	// also hashed the tag byte, so compare with its value before that byte.
	want := cr.prev
	count, err := binary.ReadUvarint(cr)
	if err != nil {
		return fmt.Errorf("%w: state stream trailer: %v", ErrCorrupt, err)
	}
	var crcb [4]byte
	if _, err := io.ReadFull(cr, crcb[:]); err != nil {
		return fmt.Errorf("%w: state stream trailer: %v", ErrCorrupt, err)
	}
	if count != uint64(len(recs)) {
		return fmt.Errorf("%w: state stream has %d records, trailer says %d", ErrCorrupt, len(recs), count)
	}
	if got := binary.BigEndian.Uint32(crcb[:]); got != want {
		return fmt.Errorf("%w: state stream checksum mismatch", ErrCorrupt)
	}
	err = db.use(func(p *pebble.DB) error {
		b := p.NewBatch()
		defer b.Close()
		if err := b.DeleteRange(prefixFSM, prefixEnd(prefixFSM), nil); err != nil {
			return err
		}
		for _, r := range recs {
			if err := b.Set(concat(prefixFSM, r.k), r.v, nil); err != nil {
				return err
			}
		}
		return b.Commit(pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("meta: restore state: %w", err)
	}
	return nil
}

type stateKV struct{ k, v []byte }

// readBounded reads a uvarint length (at most max) and that many bytes.
func readBounded(r *crcReader, max uint64, what string) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("%w: state stream %s length: %v", ErrCorrupt, what, err)
	}
	if n > max {
		return nil, fmt.Errorf("%w: state stream %s length %d exceeds %d", ErrCorrupt, what, n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: state stream %s: %v", ErrCorrupt, what, err)
	}
	return buf, nil
}

// countingWriter counts and checksums what it writes.
type countingWriter struct {
	w   io.Writer
	n   int64
	crc hash.Hash32
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	_, _ = c.crc.Write(p[:n])
	return n, err
}

// crcReader checksums what it reads; prev is the checksum before the most
// recent ReadByte, which lets RestoreState exclude the end tag.
type crcReader struct {
	r    *bufio.Reader
	crc  hash.Hash32
	prev uint32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	_, _ = c.crc.Write(p[:n])
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.prev = c.crc.Sum32()
		_, _ = c.crc.Write([]byte{b})
	}
	return b, err
}
