package log

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
	"github.com/moonmq/moonmq/engine/vfs"
)

const (
	logExt       = ".log"
	indexExt     = ".index"
	timeIndexExt = ".timeindex"

	// baseDigits is the width of a segment's zero-padded base offset name.
	baseDigits = 20

	// maxRelativeOffset bounds offset - segment base so relative offsets fit
	// the index's uint32 (Kafka keeps them within int32; so do we).
	maxRelativeOffset = math.MaxInt32

	// scanBufferSize is the read-ahead used when recovery checksums a segment.
	scanBufferSize = 1 << 20
)

func segmentFileName(base int64, ext string) string {
	return fmt.Sprintf("%0*d%s", baseDigits, base, ext)
}

// parseSegmentFileName recognises "<20 digits><ext>".
func parseSegmentFileName(name string) (base int64, ext string, ok bool) {
	i := strings.IndexByte(name, '.')
	if i != baseDigits {
		return 0, "", false
	}
	ext = name[i:]
	if ext != logExt && ext != indexExt && ext != timeIndexExt && ext != txnIndexExt {
		return 0, "", false
	}
	b, err := strconv.ParseInt(name[:i], 10, 64)
	if err != nil || b < 0 {
		return 0, "", false
	}
	return b, ext, true
}

// storage is what every segment of one log shares: where its files are,
// how they are opened, and where damage found in them is reported.
type storage struct {
	dir    string
	fs     vfs.FS
	cache  *FileCache
	health *health
	opts   func() *Options
}

func (st *storage) indexInterval() int { return st.opts().IndexIntervalBytes }

func (st *storage) ref(base int64, ext string) fileRef {
	return fileRef{fs: st.fs, cache: st.cache, path: filepath.Join(st.dir, segmentFileName(base, ext))}
}

// segment is one .log file and its two indexes. Bytes below size are whole
// batches that readers may pread; the appender writes past size and only then
// publishes the new size.
//
// Files: the active segment keeps its .log open and pinned in the file
// cache; every other file access (sealed segments' .log, all index files)
// acquires the file from the cache for the duration of the access, so idle
// segments hold no descriptors.
//
// Lifetime: the Log holds one reference while the segment is in its list;
// readers and the flusher take more. When the count drops to zero the
// segment's files leave the cache, so retention can unlink a segment while a
// read is copying from it and the descriptor closes when the read is done.
type segment struct {
	base    int64
	st      *storage
	logRef  fileRef
	pinned  *cachedFile // the .log while active; guarded by Log.appendMu
	offIdx  *sparseIndex
	timeIdx *sparseIndex

	size  atomic.Int64 // committed bytes
	maxTs atomic.Int64 // largest batch MaxTimestamp; -1 when none

	// Appender state, guarded by Log.appendMu (or exclusive at open).
	maxTsOffset     int64     // base offset of the batch that first reached maxTs
	bytesSinceIndex int64     // bytes appended since the last offset index entry
	lastTimeEntry   int64     // timestamp of the last time index entry; -1 when none
	rollStart       time.Time // reference time for segment age; zero while empty
	// jitterFrac, drawn in [0, 1) when the segment is made, is the share of
	// Options.SegmentJitter this segment rolls early by, so segments of many
	// partitions created together do not all roll at once. A fraction rather
	// than a duration, so a changed SegmentJitter applies to it at once.
	jitterFrac float64

	// Damage found in this segment (by recovery or by a read), and the
	// rebuild of indexes that failed validation when used.
	badMu        sync.Mutex
	bad          atomic.Pointer[[]badRange] // sorted by fromPos; replaced, never mutated
	indexBad     atomic.Bool                // an index entry did not match: scan until rebuilt
	rebuildTried atomic.Int64               // unix nanos of the last rebuild attempt by retryRebuild
	rebuildMu    sync.Mutex

	// unsynced: sealed by a roll, not yet fsynced (its data and indexes);
	// a directory sync outside the flusher's order must sync it first
	// (syncSealed).
	unsynced atomic.Bool

	refs      atomic.Int32
	keepFiles atomic.Bool // released for a copy of itself (Heal): leave its files in the cache
}

// badRange is a stretch of a segment that holds no valid batch: bytes
// [fromPos, toPos) where offsets [fromOffset, toOffset) should have been.
type badRange struct {
	fromPos, toPos       int64
	fromOffset, toOffset int64
	reason               string
}

func newSegment(st *storage, base int64) *segment {
	s := &segment{base: base, st: st, logRef: st.ref(base, logExt), lastTimeEntry: -1, maxTsOffset: -1,
		jitterFrac: rand.Float64()}
	s.maxTs.Store(-1)
	s.offIdx = &sparseIndex{kind: offsetIndex, ref: st.ref(base, indexExt)}
	s.timeIdx = &sparseIndex{kind: timeIndex, ref: st.ref(base, timeIndexExt)}
	s.refs.Store(1)
	return s
}

func (s *segment) name() string { return s.logRef.path }

// rollDue reports whether the segment has reached its age limit: SegmentAge
// since its roll clock started, less its share of SegmentJitter (Kafka draws
// a jitter in [0, min(segment.jitter.ms, segment.ms)) per segment). An empty
// segment is never due. Caller holds Log.appendMu.
func (s *segment) rollDue(now time.Time, opts *Options) bool {
	if s.rollStart.IsZero() {
		return false
	}
	jitter := time.Duration(s.jitterFrac * float64(min(opts.SegmentJitter, opts.SegmentAge)))
	return now.Sub(s.rollStart) >= opts.SegmentAge-jitter
}

// indexFull reports whether the offset or time index holds as many entries
// as maxIndexBytes allows (Kafka's segment.index.bytes: the log rolls rather
// than let either outgrow it). Caller holds Log.appendMu.
func (s *segment) indexFull(maxIndexBytes int) bool {
	return s.offIdx.count() >= maxIndexBytes/offsetEntrySize || s.timeIdx.count() >= maxIndexBytes/timeEntrySize
}

// createFile creates (or empties) a file and closes it.
func createFile(r fileRef) error {
	r.forget()
	f, err := r.fs.OpenFile(r.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", r.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", r.path, err)
	}
	return nil
}

// createSegment creates (or empties) the files of a new, active segment.
func createSegment(st *storage, base int64) (*segment, error) {
	s := newSegment(st, base)
	for _, r := range []fileRef{s.logRef, s.offIdx.ref, s.timeIdx.ref} {
		if err := createFile(r); err != nil {
			return nil, fmt.Errorf("create segment: %w", err)
		}
	}
	s.offIdx.mem = []byte{}
	s.timeIdx.mem = []byte{}
	if err := s.pin(); err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	return s, nil
}

// openSegment describes an existing segment from its files' sizes; nothing
// stays open. indexesOK is false when either index file is missing or not a
// whole number of entries; the caller then rebuilds them with scan.
func openSegment(st *storage, base int64) (s *segment, indexesOK bool, err error) {
	s = newSegment(st, base)
	info, err := st.fs.Stat(s.logRef.path)
	if err != nil {
		return nil, false, fmt.Errorf("open segment: %w", err)
	}
	s.size.Store(info.Size)
	indexesOK = true
	for _, ix := range []*sparseIndex{s.offIdx, s.timeIdx} {
		ok, err := ix.open()
		if err != nil {
			return nil, false, err
		}
		indexesOK = indexesOK && ok
	}
	return s, indexesOK, nil
}

// pin opens the .log and keeps it open while the segment is active.
func (s *segment) pin() error {
	cf, err := s.logRef.open()
	if err != nil {
		return err
	}
	s.st.cache.pin(cf)
	s.pinned = cf
	return nil
}

// unpin lets the cache close the .log when it is idle (the segment was
// sealed). Caller holds Log.appendMu or has exclusive access.
func (s *segment) unpin() {
	if cf := s.pinned; cf != nil {
		s.pinned = nil
		s.st.cache.unpin(cf)
		s.logRef.release(cf)
	}
}

// activeFile is the pinned .log of the active segment. Only the appender
// (holding Log.appendMu) uses it.
func (s *segment) activeFile() vfs.File { return s.pinned.f }

// withLog runs fn with the segment's .log open.
func (s *segment) withLog(fn func(f vfs.File) error) error {
	cf, err := s.logRef.open()
	if err != nil {
		return err
	}
	defer s.logRef.release(cf)
	return fn(cf.f)
}

// readAt reads len(p) bytes at off from the .log.
func (s *segment) readAt(p []byte, off int64) error {
	return s.withLog(func(f vfs.File) error {
		if _, err := f.ReadAt(p, off); err != nil {
			return fmt.Errorf("read segment %s at %d: %w", s.name(), off, err)
		}
		return nil
	})
}

// tryAcquire takes a reference unless the segment is already released.
func (s *segment) tryAcquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (s *segment) acquire() {
	if !s.tryAcquire() {
		panic("log: acquire of a released segment") // programming error: caller must hold a reference
	}
}

// release drops a reference. With the last one the segment's files leave
// the cache (a pinned .log is unpinned), closing their descriptors once no
// read uses them.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		s.unpin()
		if !s.keepFiles.Load() {
			s.logRef.forget()
			s.offIdx.ref.forget()
			s.timeIdx.ref.forget()
		}
	}
}

// removeFiles unlinks the segment's files (descriptors in use stay valid
// until released). The .log goes first so a crash midway leaves only orphan
// indexes, which Open deletes.
func (s *segment) removeFiles() error {
	var first error
	for _, r := range []fileRef{s.logRef, s.offIdx.ref, s.timeIdx.ref} {
		r.forget()
		if err := s.st.fs.Remove(r.path); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
			first = fmt.Errorf("remove segment file: %w", err)
		}
	}
	// The aborted-transaction index is not cached (txnindex.go).
	if err := s.st.fs.Remove(filepath.Join(s.st.dir, segmentFileName(s.base, txnIndexExt))); err != nil &&
		!errors.Is(err, fs.ErrNotExist) && first == nil {
		first = fmt.Errorf("remove segment file: %w", err)
	}
	return first
}

// indexBatch records a batch appended at pos in the segment's indexes and
// running maxima: an offset index entry once indexInterval bytes have gone by
// since the previous one, and with it a time index entry if the running max
// timestamp grew. The first batch of a segment needs no entry (lookups fall
// back to position 0).
func (s *segment) indexBatch(h batch.Header, pos int64, indexInterval int) {
	if h.MaxTimestamp > s.maxTs.Load() {
		s.maxTs.Store(h.MaxTimestamp)
		s.maxTsOffset = h.BaseOffset
	}
	if s.bytesSinceIndex >= int64(indexInterval) {
		s.offIdx.appendOffset(uint32(h.BaseOffset-s.base), uint32(pos))
		s.appendTimeEntry()
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(h.Size())
}

// appendTimeEntry adds a time index entry for the running maximum if it grew
// since the last entry. Called at index points and when the segment is
// sealed, so a sealed segment's last time entry is its exact maximum.
func (s *segment) appendTimeEntry() {
	if ts := s.maxTs.Load(); ts > s.lastTimeEntry && ts >= 0 {
		s.timeIdx.appendTime(ts, uint32(s.maxTsOffset-s.base))
		s.lastTimeEntry = ts
	}
}

// seal finishes the segment's indexes when it stops being active and lets
// the cache close its files when idle.
func (s *segment) seal() error {
	s.appendTimeEntry()
	if err := s.offIdx.seal(); err != nil {
		return err
	}
	if err := s.timeIdx.seal(); err != nil {
		return err
	}
	s.unpin()
	return nil
}

// flushIndexes writes pending index entries without sealing.
func (s *segment) flushIndexes() error {
	if err := s.offIdx.flush(); err != nil {
		return err
	}
	return s.timeIdx.flush()
}

// syncData fsyncs the .log file.
func (s *segment) syncData() error {
	return s.withLog(func(f vfs.File) error {
		if err := f.SyncData(); err != nil {
			return fmt.Errorf("sync segment %s: %w", s.name(), err)
		}
		return nil
	})
}

// syncAll fsyncs the .log and both index files.
func (s *segment) syncAll() error {
	if err := s.syncData(); err != nil {
		return err
	}
	if err := s.offIdx.sync(); err != nil {
		return err
	}
	return s.timeIdx.sync()
}

// loadIndexState restores the running maxima from a trusted time index (the
// last entry of a sealed or cleanly closed segment is its exact maximum).
func (s *segment) loadIndexState() error {
	ts, rel, ok, err := s.timeIdx.last()
	if err != nil {
		return err
	}
	if ok {
		s.maxTs.Store(ts)
		s.maxTsOffset = s.base + rel
		s.lastTimeEntry = ts
	}
	_, pos, ok, err := s.offIdx.last()
	if err != nil {
		return err
	}
	if ok {
		s.bytesSinceIndex = s.size.Load() - pos
	} else {
		s.bytesSinceIndex = s.size.Load()
	}
	return nil
}

// checkIndexes is the cheap sanity check of a segment trusted without a
// scan: the last offset index entry must point at a batch header with the
// offset it claims, and the last time index entry must be within the
// segment. A failure means the segment is rescanned. Entries are also
// checked one by one when lookups use them (seekPosition).
func (s *segment) checkIndexes() (bool, error) {
	rel, pos, ok, err := s.offIdx.last()
	if err != nil {
		return false, err
	}
	size := s.size.Load()
	if ok {
		if pos+batch.HeaderSize > size {
			return false, nil
		}
		var hdr [batch.HeaderSize]byte
		if err := s.readAt(hdr[:], pos); err != nil {
			return false, err
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil || h.BaseOffset != s.base+rel || int64(h.Size()) > size-pos {
			return false, nil
		}
	}
	if ts, trel, ok, err := s.timeIdx.last(); err != nil {
		return false, err
	} else if ok {
		// The last time entry becomes the segment's newest timestamp, which
		// drives retention: it must be its batch's MaxTimestamp.
		if ts < 0 || trel > maxRelativeOffset {
			return false, nil
		}
		h, _, _, found, err := s.findBatch(s.base + trel)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return false, err
		}
		if err != nil || !found || h.BaseOffset != s.base+trel || h.MaxTimestamp != ts {
			return false, nil
		}
	}
	return true, nil
}

// truncateFile cuts the .log to n bytes.
func (s *segment) truncateFile(n int64) error {
	err := s.withLog(func(f vfs.File) error { return f.Truncate(n) })
	if err != nil {
		return fmt.Errorf("truncate segment %s to %d: %w", s.name(), n, err)
	}
	s.size.Store(n)
	return nil
}

// modTime is the .log's modification time, the age of a segment without
// timestamps.
func (s *segment) modTime() (time.Time, error) {
	info, err := s.st.fs.Stat(s.logRef.path)
	if err != nil {
		return time.Time{}, fmt.Errorf("stat segment %s: %w", s.name(), err)
	}
	return info.ModTime, nil
}

// badRanges returns the damaged stretches known in this segment.
func (s *segment) badRanges() []badRange {
	if p := s.bad.Load(); p != nil {
		return *p
	}
	return nil
}

// badAt returns the damaged stretch starting at pos, if there is one.
func (s *segment) badAt(pos int64) (badRange, bool) {
	for _, b := range s.badRanges() {
		if b.fromPos == pos {
			return b, true
		}
	}
	return badRange{}, false
}

// offsetAfterBad is where damage in [fromPos, toPos) whose end offset was
// not known (it ran to the end of what its read could see, in the active
// segment) ends: the base offset of a well-formed batch at toPos, written
// since. It is recorded once found; -1 while there is none.
func (s *segment) offsetAfterBad(fromPos, toPos, fromOffset int64) int64 {
	if toPos+batch.HeaderSize > s.size.Load() {
		return -1
	}
	cf, err := s.logRef.open()
	if err != nil {
		return -1
	}
	defer s.logRef.release(cf)
	var hdr [batch.HeaderSize]byte
	if _, err := cf.f.ReadAt(hdr[:], toPos); err != nil {
		return -1
	}
	h, err := batch.ParseHeader(hdr[:])
	if err != nil || s.checkBatch(h, toPos, s.size.Load(), fromOffset) != "" {
		return -1
	}
	s.badMu.Lock()
	defer s.badMu.Unlock()
	next := append([]badRange(nil), s.badRanges()...)
	for i := range next {
		if next[i].fromPos == fromPos && next[i].toOffset < 0 {
			next[i].toOffset = h.BaseOffset
		}
	}
	s.bad.Store(&next)
	return h.BaseOffset
}

// addBad records a damaged stretch (once) and reports it. It reports
// whether the range is new.
func (s *segment) addBad(b badRange) bool {
	s.badMu.Lock()
	cur := s.badRanges()
	for _, x := range cur {
		if x.fromPos == b.fromPos {
			s.badMu.Unlock()
			return false
		}
	}
	next := append(append([]badRange(nil), cur...), b)
	sort.Slice(next, func(i, j int) bool { return next[i].fromPos < next[j].fromPos })
	s.bad.Store(&next)
	s.badMu.Unlock()
	s.st.health.corruptionFound(s, b)
	return true
}
