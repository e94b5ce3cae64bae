package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moonmq/moonmq/engine/batch"
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
	if ext != logExt && ext != indexExt && ext != timeIndexExt {
		return 0, "", false
	}
	b, err := strconv.ParseInt(name[:i], 10, 64)
	if err != nil || b < 0 {
		return 0, "", false
	}
	return b, ext, true
}

// segment is one .log file and its two indexes. Bytes below size are whole
// batches that readers may pread; the appender writes past size and only then
// publishes the new size.
//
// Lifetime: the Log holds one reference while the segment is in its list;
// readers and the flusher take more. Files are closed when the count drops
// to zero, so retention can unlink a segment while a read is copying from it.
type segment struct {
	base    int64
	dir     string
	f       *os.File
	offIdx  *sparseIndex
	timeIdx *sparseIndex

	size  atomic.Int64 // committed bytes
	maxTs atomic.Int64 // largest batch MaxTimestamp; -1 when none

	// Appender state, guarded by Log.appendMu (or exclusive at open).
	maxTsOffset     int64     // base offset of the batch that first reached maxTs
	bytesSinceIndex int64     // bytes appended since the last offset index entry
	lastTimeEntry   int64     // timestamp of the last time index entry; -1 when none
	rollStart       time.Time // reference time for segment age; zero while empty

	refs atomic.Int32
}

func (s *segment) path(ext string) string { return filepath.Join(s.dir, segmentFileName(s.base, ext)) }

// createSegment creates (or empties) the files of a new segment.
func createSegment(dir string, base int64) (*segment, error) {
	s := &segment{base: base, dir: dir, lastTimeEntry: -1, maxTsOffset: -1}
	s.maxTs.Store(-1)
	var err error
	if s.f, err = os.OpenFile(s.path(logExt), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	if s.offIdx, err = openIndex(s.path(indexExt), offsetIndex, true); err != nil {
		_ = s.f.Close()
		return nil, err
	}
	if s.timeIdx, err = openIndex(s.path(timeIndexExt), timeIndex, true); err != nil {
		_ = s.f.Close()
		_ = s.offIdx.close()
		return nil, err
	}
	s.offIdx.mem = []byte{}
	s.timeIdx.mem = []byte{}
	s.refs.Store(1)
	return s, nil
}

// openSegment opens an existing segment. indexesOK is false when either index
// file is missing or not a whole number of entries; the caller then rebuilds
// them with scan.
func openSegment(dir string, base int64) (s *segment, indexesOK bool, err error) {
	s = &segment{base: base, dir: dir, lastTimeEntry: -1, maxTsOffset: -1}
	s.maxTs.Store(-1)
	if s.f, err = os.OpenFile(s.path(logExt), os.O_RDWR, 0o644); err != nil {
		return nil, false, fmt.Errorf("open segment: %w", err)
	}
	st, err := s.f.Stat()
	if err != nil {
		_ = s.f.Close()
		return nil, false, fmt.Errorf("stat segment %s: %w", s.f.Name(), err)
	}
	s.size.Store(st.Size())
	indexesOK = true
	for _, ext := range []string{indexExt, timeIndexExt} {
		if _, err := os.Stat(s.path(ext)); errors.Is(err, os.ErrNotExist) {
			indexesOK = false
		}
	}
	if s.offIdx, err = openIndex(s.path(indexExt), offsetIndex, !indexesOK); err != nil {
		_ = s.f.Close()
		return nil, false, err
	}
	if s.timeIdx, err = openIndex(s.path(timeIndexExt), timeIndex, !indexesOK); err != nil {
		_ = s.f.Close()
		_ = s.offIdx.close()
		return nil, false, err
	}
	s.refs.Store(1)
	if indexesOK {
		for _, ix := range []*sparseIndex{s.offIdx, s.timeIdx} {
			ok, err := ix.fileSizeOK()
			if err != nil {
				s.release()
				return nil, false, err
			}
			indexesOK = indexesOK && ok
		}
	}
	return s, indexesOK, nil
}

// tryAcquire takes a reference unless the segment is already closed.
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
		panic("log: acquire of a closed segment") // programming error: caller must hold a reference
	}
}

// release drops a reference, closing the files with the last one.
func (s *segment) release() {
	if s.refs.Add(-1) == 0 {
		_ = s.f.Close()
		_ = s.offIdx.close()
		_ = s.timeIdx.close()
	}
}

// removeFiles unlinks the segment's files (open descriptors stay usable until
// the last reference is released). The .log goes first so a crash midway
// leaves only orphan indexes, which Open deletes.
func (s *segment) removeFiles() error {
	var first error
	for _, ext := range []string{logExt, indexExt, timeIndexExt} {
		if err := os.Remove(s.path(ext)); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = fmt.Errorf("remove segment file: %w", err)
		}
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

// seal finishes the segment's indexes when it stops being active.
func (s *segment) seal() error {
	s.appendTimeEntry()
	if err := s.offIdx.seal(); err != nil {
		return err
	}
	if err := s.timeIdx.seal(); err != nil {
		return err
	}
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
	if err := datasync(s.f); err != nil {
		return fmt.Errorf("sync segment %s: %w", s.f.Name(), err)
	}
	return nil
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
// segment. A failure means the segment is rescanned.
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
		if _, err := s.f.ReadAt(hdr[:], pos); err != nil {
			return false, fmt.Errorf("read segment %s: %w", s.f.Name(), err)
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil || h.BaseOffset != s.base+rel || int64(h.Size()) > size-pos {
			return false, nil
		}
	}
	if ts, trel, ok, err := s.timeIdx.last(); err != nil {
		return false, err
	} else if ok && (ts < 0 || trel > maxRelativeOffset) {
		return false, nil
	}
	return true, nil
}

// scanResult describes a segment after scan.
type scanResult struct {
	validBytes   int64  // length of the valid prefix
	next         int64  // offset after the last valid batch; base when empty
	firstBatchTs int64  // MaxTimestamp of the first batch; -1 when empty
	stopReason   string // why the scan stopped before the end of the file
	epochChanged bool
}

// scan checksums the segment batch by batch from the start, rebuilding both
// indexes and the running maxima, and recording leader epochs. It stops at the
// first batch that is torn, fails its CRC, or breaks offset order; the caller
// truncates there. I/O errors are returned as errors, corruption is not.
// Caller has exclusive access (open, or under the append and truncate locks).
func (s *segment) scan(indexInterval int, epochs *epochCache) (scanResult, error) {
	res := scanResult{next: s.base, firstBatchTs: -1}
	st, err := s.f.Stat()
	if err != nil {
		return res, fmt.Errorf("stat segment %s: %w", s.f.Name(), err)
	}
	fileSize := st.Size()
	if err := s.offIdx.reset(nil, true); err != nil {
		return res, err
	}
	if err := s.timeIdx.reset(nil, true); err != nil {
		return res, err
	}
	s.maxTs.Store(-1)
	s.maxTsOffset, s.lastTimeEntry, s.bytesSinceIndex = -1, -1, 0

	br := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, fileSize), scanBufferSize)
	var hdr [batch.HeaderSize]byte
	pos := int64(0)
	for pos < fileSize {
		if fileSize-pos < batch.HeaderSize {
			res.stopReason = fmt.Sprintf("torn batch header: %d bytes", fileSize-pos)
			break
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return res, fmt.Errorf("read segment %s at %d: %w", s.f.Name(), pos, err)
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil {
			res.stopReason = err.Error()
			break
		}
		size := int64(batch.LengthFieldEnd) + int64(h.Length)
		switch {
		case h.Length < batch.HeaderSize-batch.LengthFieldEnd:
			res.stopReason = fmt.Sprintf("batch length %d too small", h.Length)
		case size > fileSize-pos:
			res.stopReason = fmt.Sprintf("torn batch: %d bytes declared, %d present", size, fileSize-pos)
		case h.LastOffsetDelta < 0 || h.NumRecords < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1:
			res.stopReason = fmt.Sprintf("bad counts: %d records, last offset delta %d", h.NumRecords, h.LastOffsetDelta)
		case h.BaseOffset < res.next:
			res.stopReason = fmt.Sprintf("base offset %d below expected %d", h.BaseOffset, res.next)
		case h.LastOffset()-s.base > maxRelativeOffset:
			res.stopReason = fmt.Sprintf("offset %d too far from segment base", h.LastOffset())
		}
		if res.stopReason != "" {
			break
		}
		crc := batch.UpdateChecksum(0, hdr[batch.CRCStart:])
		for rem := size - batch.HeaderSize; rem > 0; {
			n := min(rem, int64(br.Size()))
			p, err := br.Peek(int(n))
			if err != nil {
				return res, fmt.Errorf("read segment %s at %d: %w", s.f.Name(), pos, err)
			}
			crc = batch.UpdateChecksum(crc, p)
			_, _ = br.Discard(int(n))
			rem -= n
		}
		if crc != h.CRC {
			res.stopReason = fmt.Sprintf("crc mismatch at offset %d", h.BaseOffset)
			break
		}
		if res.firstBatchTs < 0 && pos == 0 {
			res.firstBatchTs = h.MaxTimestamp
		}
		s.indexBatch(h, pos, indexInterval)
		if epochs != nil && epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset) {
			res.epochChanged = true
		}
		pos += size
		res.next = h.NextOffset()
	}
	res.validBytes = pos
	return res, nil
}

// truncateFile cuts the .log to n bytes.
func (s *segment) truncateFile(n int64) error {
	if err := s.f.Truncate(n); err != nil {
		return fmt.Errorf("truncate segment %s to %d: %w", s.f.Name(), n, err)
	}
	s.size.Store(n)
	return nil
}

// modTime is the .log's modification time, the age of a segment without
// timestamps.
func (s *segment) modTime() (time.Time, error) {
	st, err := s.f.Stat()
	if err != nil {
		return time.Time{}, fmt.Errorf("stat segment %s: %w", s.f.Name(), err)
	}
	return st.ModTime(), nil
}
