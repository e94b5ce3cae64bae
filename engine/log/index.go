package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/moonmq/moonmq/engine/vfs"
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
//
// Indexes are derived data: recovery rebuilds a missing or malformed one
// from its segment, and a lookup that finds an entry not matching the
// segment falls back to scanning and rebuilds the index (seekPosition).
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
// once sealed, mem is dropped and lookups binary-search the file with pread
// (the file comes from the file cache), so a broker with many old segments
// keeps neither their indexes on the heap nor their descriptors open.
//
// Writers hold Log.appendMu; mu orders them against concurrent lookups, and
// a rebuild (replace) against both.
type sparseIndex struct {
	kind indexKind
	ref  fileRef

	mu      sync.RWMutex
	mem     []byte // every entry while active; nil when sealed
	n       int    // number of entries
	flushed int    // bytes of mem already written to the file
}

// open reads the index file's size. ok is false when the file is missing
// or not a whole number of entries.
func (ix *sparseIndex) open() (ok bool, err error) {
	info, err := ix.ref.fs.Stat(ix.ref.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat index %s: %w", ix.ref.path, err)
	}
	es := int64(ix.kind.entrySize())
	ix.n = int(info.Size / es)
	ix.flushed = ix.n * ix.kind.entrySize()
	return info.Size%es == 0, nil
}

// withFile runs fn with the index file open.
func (ix *sparseIndex) withFile(fn func(f vfs.File) error) error {
	cf, err := ix.ref.open()
	if err != nil {
		return err
	}
	defer ix.ref.release(cf)
	return fn(cf.f)
}

// load reads the whole file into memory, making the index active.
func (ix *sparseIndex) load() error {
	size := ix.n * ix.kind.entrySize()
	buf := make([]byte, size)
	if size > 0 {
		err := ix.withFile(func(f vfs.File) error {
			if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
				return fmt.Errorf("read index %s: %w", ix.ref.path, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	ix.mu.Lock()
	ix.mem = buf
	ix.flushed = size
	ix.mu.Unlock()
	return nil
}

// reset replaces the index with the given encoded entries (a rebuild),
// writing them to the file, which is created if missing. keepInMemory makes
// the index active.
func (ix *sparseIndex) reset(entries []byte, keepInMemory bool) error {
	ix.ref.forget()
	f, err := ix.ref.fs.OpenFile(ix.ref.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("rewrite index %s: %w", ix.ref.path, err)
	}
	if len(entries) > 0 {
		if _, err := f.WriteAt(entries, 0); err != nil {
			_ = f.Close()
			return fmt.Errorf("write index %s: %w", ix.ref.path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write index %s: %w", ix.ref.path, err)
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

// replace swaps a sealed index's file for a rebuilt one: written beside it,
// fsynced, renamed over it. Lookups are excluded while the file and the
// entry count change together.
func (ix *sparseIndex) replace(entries []byte) error {
	tmp := ix.ref.path + tmpSuffix
	if err := writeSynced(ix.ref.fs, tmp, entries); err != nil {
		return err
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, err := ix.ref.fs.Stat(logPathOf(ix.ref.path)); err != nil {
		// The segment was removed (retention) meanwhile: do not recreate
		// its index.
		_ = ix.ref.fs.Remove(tmp)
		return fmt.Errorf("replace index %s: its segment is gone: %w", ix.ref.path, errFileGone)
	}
	if err := ix.ref.fs.Rename(tmp, ix.ref.path); err != nil {
		return fmt.Errorf("replace index %s: %w", ix.ref.path, err)
	}
	ix.ref.forget()
	ix.n = len(entries) / ix.kind.entrySize()
	ix.flushed = len(entries)
	if ix.mem != nil {
		ix.mem = entries
	}
	return nil
}

// logPathOf is the .log file an index file belongs to.
func logPathOf(indexPath string) string {
	return strings.TrimSuffix(strings.TrimSuffix(indexPath, indexExt), timeIndexExt) + logExt
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
	err := ix.withFile(func(f vfs.File) error {
		_, err := f.WriteAt(ix.mem[ix.flushed:], int64(ix.flushed))
		return err
	})
	if err != nil {
		return fmt.Errorf("write index %s: %w", ix.ref.path, err)
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

// isActive reports whether the index is held in memory (its segment is
// the active one).
func (ix *sparseIndex) isActive() bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.mem != nil
}

func (ix *sparseIndex) count() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.n
}

// entries returns a copy of every entry (for tests and rebuild checks).
func (ix *sparseIndex) entries() ([]byte, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mem != nil {
		return append([]byte(nil), ix.mem...), nil
	}
	buf := make([]byte, ix.n*ix.kind.entrySize())
	if len(buf) == 0 {
		return buf, nil
	}
	err := ix.withFile(func(f vfs.File) error {
		_, err := f.ReadAt(buf, 0)
		return err
	})
	return buf, err
}

// reader gives access to the entries of a locked index: from memory, or by
// pread from the file opened once per lookup.
type indexReader struct {
	ix  *sparseIndex
	cf  *cachedFile
	buf [timeEntrySize]byte
}

// begin opens the index for a lookup. Caller holds ix.mu for reading.
func (ix *sparseIndex) begin() (*indexReader, error) {
	r := &indexReader{ix: ix}
	if ix.mem == nil && ix.n > 0 {
		cf, err := ix.ref.open()
		if err != nil {
			return nil, err
		}
		r.cf = cf
	}
	return r, nil
}

func (r *indexReader) end() {
	if r.cf != nil {
		r.ix.ref.release(r.cf)
	}
}

// entry returns entry i.
func (r *indexReader) entry(i int) ([]byte, error) {
	es := r.ix.kind.entrySize()
	if r.ix.mem != nil {
		return r.ix.mem[i*es : (i+1)*es], nil
	}
	if _, err := r.cf.f.ReadAt(r.buf[:es], int64(i*es)); err != nil {
		return nil, fmt.Errorf("read index %s entry %d: %w", r.ix.ref.path, i, err)
	}
	return r.buf[:es], nil
}

func (ix *sparseIndex) key(e []byte) int64 {
	if ix.kind == offsetIndex {
		return int64(binary.BigEndian.Uint32(e))
	}
	return int64(binary.BigEndian.Uint64(e))
}

func (ix *sparseIndex) value(e []byte) int64 {
	if ix.kind == offsetIndex {
		return int64(binary.BigEndian.Uint32(e[4:]))
	}
	return int64(binary.BigEndian.Uint32(e[8:]))
}

// floor returns the index of the last entry whose key is <= k (< k when
// strict), or -1 if there is none, and that entry's key and value
// (position for the offset index, relative offset for the time index).
func (ix *sparseIndex) floor(k int64, strict bool) (i int, key, value int64, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	r, err := ix.begin()
	if err != nil {
		return -1, 0, 0, err
	}
	defer r.end()
	lo, hi := 0, ix.n // find the first entry with key > k (>= k when strict)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		e, err := r.entry(mid)
		if err != nil {
			return -1, 0, 0, err
		}
		key := ix.key(e)
		if key < k || (!strict && key == k) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return -1, 0, 0, nil
	}
	e, err := r.entry(lo - 1)
	if err != nil {
		return -1, 0, 0, err
	}
	return lo - 1, ix.key(e), ix.value(e), nil
}

// last returns the key and value of the last entry.
func (ix *sparseIndex) last() (key, value int64, ok bool, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.n == 0 {
		return 0, 0, false, nil
	}
	r, err := ix.begin()
	if err != nil {
		return 0, 0, false, err
	}
	defer r.end()
	e, err := r.entry(ix.n - 1)
	if err != nil {
		return 0, 0, false, err
	}
	return ix.key(e), ix.value(e), true, nil
}

func (ix *sparseIndex) sync() error {
	err := ix.withFile(func(f vfs.File) error { return f.SyncData() })
	if err != nil {
		return fmt.Errorf("sync index %s: %w", ix.ref.path, err)
	}
	return nil
}
