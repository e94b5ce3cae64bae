package log

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
)

// Index file formats (big-endian, no header):
//
//	.index      relative offset uint32 | file position uint32            (8 bytes)
//	.timeindex  max timestamp int64    | relative offset uint32          (12 bytes)
//
// Offset index entries point at the start of a batch whose base offset is
// segment base + relative offset. A time index entry (T, r) says that the
// largest batch MaxTimestamp among the batches up to and including the one at
// relative offset r is T, and that r's batch is where T was first reached.
// Keys (relative offset, timestamp) strictly increase.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12

	// indexFlushBytes is how many encoded entries accumulate in memory before
	// they are written to the file. Indexes need not be durable (recovery
	// rebuilds them) so they are written in chunks, never per batch.
	indexFlushBytes = 4096
)

type indexKind int

const (
	offsetIndex indexKind = iota
	timeIndex
)

func (k indexKind) entrySize() int {
	if k == offsetIndex {
		return offsetEntrySize
	}
	return timeEntrySize
}

// sparseIndex is one index file. While its segment is active the entries are
// also held in memory (mem) for lookups and appended to the file in chunks;
// once sealed, mem is dropped and lookups binary-search the file with pread,
// so a broker with many old segments does not keep their indexes on the heap.
//
// Writers hold Log.appendMu; mu only orders them against concurrent lookups.
type sparseIndex struct {
	kind indexKind
	path string
	f    *os.File

	mu      sync.RWMutex
	mem     []byte // every entry while active; nil when sealed
	n       int    // number of entries
	flushed int    // bytes of mem already written to f
}

func openIndex(path string, kind indexKind, create bool) (*sparseIndex, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	ix := &sparseIndex{kind: kind, path: path, f: f}
	if !create {
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("stat index %s: %w", path, err)
		}
		ix.n = int(st.Size() / int64(kind.entrySize()))
		ix.flushed = ix.n * kind.entrySize()
	}
	return ix, nil
}

// fileSizeOK reports whether the file holds a whole number of entries.
func (ix *sparseIndex) fileSizeOK() (bool, error) {
	st, err := ix.f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat index %s: %w", ix.path, err)
	}
	return st.Size()%int64(ix.kind.entrySize()) == 0, nil
}

// load reads the whole file into memory, making the index active.
func (ix *sparseIndex) load() error {
	size := ix.n * ix.kind.entrySize()
	buf := make([]byte, size)
	if _, err := ix.f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return fmt.Errorf("read index %s: %w", ix.path, err)
	}
	ix.mu.Lock()
	ix.mem = buf
	ix.flushed = size
	ix.mu.Unlock()
	return nil
}

// reset replaces the index with the given encoded entries (a rebuild),
// writing them to the file. keepInMemory makes the index active.
func (ix *sparseIndex) reset(entries []byte, keepInMemory bool) error {
	if err := ix.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate index %s: %w", ix.path, err)
	}
	if len(entries) > 0 {
		if _, err := ix.f.WriteAt(entries, 0); err != nil {
			return fmt.Errorf("write index %s: %w", ix.path, err)
		}
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.n = len(entries) / ix.kind.entrySize()
	ix.flushed = len(entries)
	if keepInMemory {
		if entries == nil {
			entries = []byte{} // non-nil: the index is active
		}
		ix.mem = entries
	} else {
		ix.mem = nil
	}
	return nil
}

func (ix *sparseIndex) appendOffset(rel, pos uint32) {
	var e [offsetEntrySize]byte
	binary.BigEndian.PutUint32(e[0:], rel)
	binary.BigEndian.PutUint32(e[4:], pos)
	ix.appendEntry(e[:])
}

func (ix *sparseIndex) appendTime(ts int64, rel uint32) {
	var e [timeEntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(ts))
	binary.BigEndian.PutUint32(e[8:], rel)
	ix.appendEntry(e[:])
}

func (ix *sparseIndex) appendEntry(e []byte) {
	ix.mu.Lock()
	ix.mem = append(ix.mem, e...)
	ix.n++
	ix.mu.Unlock()
}

// flush writes entries not yet in the file. Caller holds Log.appendMu, the
// only context that mutates mem, so reading it here needs no lock.
func (ix *sparseIndex) flush() error {
	if ix.mem == nil || ix.flushed >= len(ix.mem) {
		return nil
	}
	if _, err := ix.f.WriteAt(ix.mem[ix.flushed:], int64(ix.flushed)); err != nil {
		return fmt.Errorf("write index %s: %w", ix.path, err)
	}
	ix.flushed = len(ix.mem)
	return nil
}

func (ix *sparseIndex) maybeFlush() error {
	if len(ix.mem)-ix.flushed < indexFlushBytes {
		return nil
	}
	return ix.flush()
}

// seal writes pending entries and drops the in-memory copy.
func (ix *sparseIndex) seal() error {
	if err := ix.flush(); err != nil {
		return err
	}
	ix.mu.Lock()
	ix.mem = nil
	ix.mu.Unlock()
	return nil
}

func (ix *sparseIndex) count() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.n
}

// entry returns entry i, from memory or with a pread into buf. Caller holds
// ix.mu for reading.
func (ix *sparseIndex) entry(i int, buf []byte) ([]byte, error) {
	es := ix.kind.entrySize()
	if ix.mem != nil {
		return ix.mem[i*es : (i+1)*es], nil
	}
	if _, err := ix.f.ReadAt(buf[:es], int64(i*es)); err != nil {
		return nil, fmt.Errorf("read index %s entry %d: %w", ix.path, i, err)
	}
	return buf[:es], nil
}

func (ix *sparseIndex) key(e []byte) int64 {
	if ix.kind == offsetIndex {
		return int64(binary.BigEndian.Uint32(e))
	}
	return int64(binary.BigEndian.Uint64(e))
}

// floor returns the index of the last entry whose key is <= k (< k when
// strict), or -1 if there is none, and that entry's value (position for the
// offset index, relative offset for the time index).
func (ix *sparseIndex) floor(k int64, strict bool) (int, int64, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var buf [timeEntrySize]byte
	lo, hi := 0, ix.n // find the first entry with key > k (>= k when strict)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		e, err := ix.entry(mid, buf[:])
		if err != nil {
			return -1, 0, err
		}
		key := ix.key(e)
		if key < k || (!strict && key == k) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return -1, 0, nil
	}
	e, err := ix.entry(lo-1, buf[:])
	if err != nil {
		return -1, 0, err
	}
	return lo - 1, ix.value(e), nil
}

func (ix *sparseIndex) value(e []byte) int64 {
	if ix.kind == offsetIndex {
		return int64(binary.BigEndian.Uint32(e[4:]))
	}
	return int64(binary.BigEndian.Uint32(e[8:]))
}

// last returns the key and value of the last entry.
func (ix *sparseIndex) last() (key, value int64, ok bool, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.n == 0 {
		return 0, 0, false, nil
	}
	var buf [timeEntrySize]byte
	e, err := ix.entry(ix.n-1, buf[:])
	if err != nil {
		return 0, 0, false, err
	}
	return ix.key(e), ix.value(e), true, nil
}

func (ix *sparseIndex) sync() error {
	if err := datasync(ix.f); err != nil {
		return fmt.Errorf("sync index %s: %w", ix.path, err)
	}
	return nil
}

func (ix *sparseIndex) close() error { return ix.f.Close() }
